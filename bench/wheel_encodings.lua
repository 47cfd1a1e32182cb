-- ARGV: mode width_ms n spread_ms
local mode, W, N, S = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local base = 1764500000000
local pay = string.rep('x', 50)
local idxk = 'idx'
local function bucket(due) return math.floor(due / W) * W end
local batch = {}
for i = 1, N do
  local due = base + 3600000 + (i * S / N) + 0.123
  local fd = math.floor(due)
  local id = 'd' .. fd .. '-' .. i
  if mode == 'zset' then
    redis.call('ZADD', 'z', string.format('%.3f', due), cmsgpack.pack(id, 'h', 'bench', 'p', pay, 'e', tostring(base), 'd', tostring(math.ceil(due))))
  elseif mode == 'listfull' then
    local b = bucket(due)
    redis.call('RPUSH', 'w:' .. b, cmsgpack.pack(id, 'h', 'bench', 'p', pay, 'e', tostring(base), 'd', tostring(math.ceil(due))))
    redis.call('ZADD', idxk, 'NX', b, b)
  elseif mode == 'listcompact' then
    local b = bucket(due)
    redis.call('RPUSH', 'w:' .. b, cmsgpack.pack(i, math.floor((due - b) * 1000), '', fd - base, 'h', 'bench', 'p', pay))
    redis.call('ZADD', idxk, 'NX', b, b)
  elseif mode == 'stream' then
    local b = bucket(due)
    redis.call('XADD', 's:' .. b, '*', 'n', i, 'o', math.floor((due - b) * 1000), 'e', fd - base, 'h', 'bench', 'p', pay)
    redis.call('ZADD', idxk, 'NX', b, b)
  elseif mode == 'hash' then
    local b = bucket(due)
    redis.call('HSET', 'h:' .. b, i, cmsgpack.pack(math.floor((due - b) * 1000), '', fd - base, 'h', 'bench', 'p', pay))
    redis.call('ZADD', idxk, 'NX', b, b)
  end
end
return N
