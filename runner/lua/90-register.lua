--[[
The registration list: every function of the library, one row each {name,
function, flag}, registered by the one loop below. Flags:
  allow-oom  runs while Redis is out of memory (maxmemory reached): the
             functions that finish or free work. The ones that add work
             have no flag and are refused with Redis's OOM error: that is
             the producer's backpressure.
  no-writes  reads only: FCALL_RO may call it, and a read-only replica
             runs it.
(A numeric for: a library cannot read globals such as ipairs while it
loads.)
]]
local FUNCTIONS = {
  {'jr_version', version, 'no-writes'},
  -- 10-enqueue.lua
  {'jr_enqueue', enqueue},
  {'jr_enqueue_many', enqueue_many},
  {'jr_ready_prepare', ready_prepare},
  -- 20-promote.lua
  {'jr_promote', promote},
  {'jr_promote_due', promote_due, 'allow-oom'},
  -- 30-worker.lua
  {'jr_ack', ack, 'allow-oom'},
  {'jr_ack_follow', ack_follow},
  {'jr_fail', fail, 'allow-oom'},
  {'jr_reclaim', reclaim, 'allow-oom'},
  {'jr_heartbeat', heartbeat, 'allow-oom'},
  {'jr_handback', handback, 'allow-oom'},
  {'jr_dead_retry', dead_retry},
  -- 40-admin.lua
  {'jr_register', register},
  {'jr_queues', queues, 'no-writes'},
  {'jr_locate', job_locate, 'no-writes'},
  {'jr_cancel', job_cancel, 'allow-oom'},
  {'jr_run_now', job_run_now},
  {'jr_delete', job_delete, 'allow-oom'},
  {'jr_delayed_page', delayed_page, 'no-writes'},
  {'jr_prune_consumers', prune_consumers, 'allow-oom'},
  {'jr_procs_forget', procs_forget, 'allow-oom'},
  {'jr_queue_remove', queue_remove, 'allow-oom'},
  -- 45-partitions.lua
  {'jr_partitions_set', partitions_set},
  -- 50-cron.lua
  {'jr_cron_set', cron_set},
  {'jr_cron_del', cron_del},
  {'jr_cron_fired', cron_fired, 'allow-oom'},
  {'jr_cron_list', cron_list, 'no-writes'},
}
for i = 1, #FUNCTIONS do
  local f = FUNCTIONS[i]
  redis.register_function{function_name = f[1], callback = f[2], flags = f[3] and {f[3]} or nil}
end
