/* Plugin loader, registry and host table, with real shared objects: the
 * fixtures in JRT_FIXTURE_DIR (sources in tests/plugins/fixtures, one per way a
 * plugin can be wrong) and the example job plugins in JRT_PLUGIN_DIR. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "jr.h"
#include "plugin.h"

#define FX(name) JRT_FIXTURE_DIR "/" name ".so"
#define GOOD_HANDLERS 5  /* good.so: fx_ok fx_fail fx_retry fx_inspect fx_bogus */
#define GOOD2_HANDLERS 2 /* good2.so: fx_late fx_stop */

static jr_registry_t *reg;
static char err[JR_ERRLEN];
static char tmpdir[64]; /* made on demand by make_tmpdir, removed by teardown */

static void setup(void) {
    reg = jr_registry_new();
    cr_assert_not_null(reg);
    err[0] = '\0';
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Remove tmpdir and everything in it. */
static void teardown(void) {
    jr_registry_free(reg);
    reg = NULL;
    if (!tmpdir[0]) return;
    chmod(tmpdir, 0700);
    nftw(tmpdir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(plugin, .init = setup, .fini = teardown, .timeout = 30);

/* A fresh private directory (mode 0700). */
static const char *make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/jrt_plugin_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    return tmpdir;
}

/* tmpdir/name, in a static buffer (one at a time). */
static const char *tmp_path(const char *name) {
    static char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    return p;
}

static void copy_file(const char *from, const char *to, mode_t mode) {
    int in = open(from, O_RDONLY);
    cr_assert_geq(in, 0, "open %s", from);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(out, 0, "open %s", to);
    char buf[8192];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0) cr_assert_eq(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
    cr_assert_eq(chmod(to, mode), 0);
}

static void touch(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert_geq(fd, 0, "create %s", path);
    close(fd);
}

/* Whole file as a NUL-terminated string (caller frees), or NULL if absent. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    cr_assert_not_null(buf);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Assert the load of `path` was refused with "PATH: ..." containing reason,
 * and that it left an empty registry empty. */
static void assert_refused(int rc, const char *path, const char *reason) {
    cr_assert_eq(rc, JR_EPLUGIN, "rc %d, err: %s", rc, err);
    size_t n = strlen(path);
    cr_assert(strncmp(err, path, n) == 0 && err[n] == ':', "message does not name %s: %s", path,
              err);
    cr_assert_not_null(strstr(err, reason), "expected \"%s\" in: %s", reason, err);
}

static void load_refused(const char *path, const char *reason) {
    int rc = jr_plugin_load(reg, path, err, sizeof err);
    assert_refused(rc, path, reason);
    cr_assert_eq(jr_registry_handlers(reg), 0);
    cr_assert_eq(jr_registry_plugins(reg), 0);
}

static void load_ok(const char *path) {
    int rc = jr_plugin_load(reg, path, err, sizeof err);
    cr_assert_eq(rc, 0, "loading %s: %s", path, err);
}

/* ---- loading good plugins ---- */

Test(plugin, good_plugin_registers_its_handlers) {
    load_ok(FX("good"));
    cr_assert_eq(jr_registry_plugins(reg), 1);
    cr_assert_eq(jr_registry_handlers(reg), GOOD_HANDLERS);
    const jr_handler_t *h = jr_registry_find(reg, "fx_ok");
    cr_assert_not_null(h);
    cr_assert_str_eq(h->name, "fx_ok");
    cr_assert_not_null(strstr(h->plugin, "/good.so"));
    cr_assert_not_null(jr_registry_find(reg, "fx_fail"));
    cr_assert_null(jr_registry_find(reg, "fx_nope"));
    cr_assert_null(jr_registry_find(reg, ""));
    cr_assert_null(jr_registry_find(reg, NULL));
}

Test(plugin, two_plugins_lookups_across_both) {
    load_ok(FX("good2"));
    load_ok(FX("good"));
    cr_assert_eq(jr_registry_plugins(reg), 2);
    cr_assert_eq(jr_registry_handlers(reg), GOOD_HANDLERS + GOOD2_HANDLERS);
    const char *all[] = {"fx_ok", "fx_fail", "fx_retry", "fx_inspect", "fx_bogus", "fx_late",
                         "fx_stop"};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        const jr_handler_t *h = jr_registry_find(reg, all[i]);
        cr_assert_not_null(h, "%s", all[i]);
        cr_assert_str_eq(h->name, all[i]);
    }
}

Test(plugin, empty_registry) {
    cr_assert_eq(jr_registry_handlers(reg), 0);
    cr_assert_eq(jr_registry_plugins(reg), 0);
    cr_assert_null(jr_registry_find(reg, "fx_ok"));
    jr_registry_free(NULL);
}

/* ---- one test per refusal ---- */

Test(plugin, refuses_bad_magic) {
    load_refused(FX("bad_magic"), "wrong magic 0x12345678 (not a jobrunner plugin)");
}

Test(plugin, refuses_other_major) {
    load_refused(FX("bad_major"), "built for plugin ABI 2.x, this jobrunner supports 1.x");
}

Test(plugin, refuses_newer_minor) {
    char reason[128];
    snprintf(reason, sizeof reason,
             "built for plugin ABI 1.5, newer than this jobrunner's 1.%d (upgrade jobrunner)",
             JR_PLUGIN_ABI_MINOR);
    load_refused(FX("newer_minor"), reason);
}

Test(plugin, refuses_short_descriptor) {
    char reason[128];
    snprintf(reason, sizeof reason, "descriptor is 16 bytes, ABI 1.%d needs at least %zu",
             JR_PLUGIN_ABI_MINOR, sizeof(jr_plugin_t));
    load_refused(FX("short_struct"), reason);
}

Test(plugin, refuses_minor_1_descriptor_without_room_for_its_hooks) {
    char reason[128];
    snprintf(reason, sizeof reason, "descriptor is %zu bytes, ABI 1.1 needs at least %zu",
             offsetof(jr_plugin_t, runner_init), offsetof(jr_plugin_t, runner_exit) + sizeof(void *));
    load_refused(FX("short_minor1"), reason);
}

Test(plugin, accepts_an_older_minor_with_its_shorter_descriptor) {
    load_ok(FX("old_minor"));
    const jr_handler_t *h = jr_registry_find(reg, "fx_old_minor");
    cr_assert_not_null(h);
    jr_registry_runner_init(reg); /* must not read hooks a 1.0 descriptor lacks */
    cr_assert_eq(jr_handler_ready(reg, h, err, sizeof err), 0, "%s", err);
    jr_registry_runner_exit(reg);
}


Test(plugin, refuses_missing_entry) {
    load_refused(FX("no_entry"), "no jr_plugin_entry symbol (not a jobrunner plugin)");
}

Test(plugin, refuses_null_descriptor) {
    load_refused(FX("null_desc"), "jr_plugin_entry() returned NULL");
}

Test(plugin, refuses_missing_init) { load_refused(FX("no_init"), "no init function"); }

Test(plugin, refuses_failing_init) { load_refused(FX("init_fails"), "init failed (returned 3)"); }

Test(plugin, refuses_handler_registered_twice_by_itself) {
    load_refused(FX("dup_self"), "handler \"fx_self\" registered twice");
}

Test(plugin, refuses_invalid_handler_name) {
    load_refused(FX("bad_name"), "invalid handler name \"bad name!\"");
}

Test(plugin, refuses_non_elf_file) {
    load_refused(FX("not_elf"), "ELF");
    /* dlerror's own copy of the path is not repeated. */
    const char *again = strstr(err + strlen(FX("not_elf")), "not_elf.so");
    cr_assert_null(again, "path repeated: %s", err);
}

Test(plugin, refuses_missing_file) {
    load_refused(FX("does_not_exist"), "No such file or directory");
}

Test(plugin, refuses_directory_as_file) { load_refused(JRT_FIXTURE_DIR, "not a regular file"); }

Test(plugin, refuses_handler_of_another_plugin) {
    load_ok(FX("good"));
    int rc = jr_plugin_load(reg, FX("dup_handler"), err, sizeof err);
    assert_refused(rc, FX("dup_handler"), "handler \"fx_ok\" already registered by /");
    cr_assert_not_null(strstr(err, "/good.so"), "%s", err);
}

Test(plugin, refuses_same_file_twice) {
    load_ok(FX("good"));
    int rc = jr_plugin_load(reg, FX("good"), err, sizeof err);
    assert_refused(rc, FX("good"), "already loaded as /");
    cr_assert_eq(jr_registry_plugins(reg), 1);
    cr_assert_eq(jr_registry_handlers(reg), GOOD_HANDLERS);
}

Test(plugin, refuses_init_that_ignores_a_failed_registration) {
    make_tmpdir();
    char marker[PATH_MAX];
    snprintf(marker, sizeof marker, "%s", tmp_path("fini"));
    setenv("JRT_FINI_MARKER", marker, 1);
    load_refused(FX("ignore_refusal"), "invalid handler name \"\"");
    cr_assert_null(jr_registry_find(reg, "fx_ignored"));
    /* init succeeded, so its fini undid it. */
    char *m = slurp(marker);
    cr_assert_not_null(m, "fini was not called");
    cr_assert_str_eq(m, "ignore_refusal\n");
    free(m);
}

Test(plugin, failed_init_is_not_finalised) {
    make_tmpdir();
    char marker[PATH_MAX];
    snprintf(marker, sizeof marker, "%s", tmp_path("fini"));
    setenv("JRT_FINI_MARKER", marker, 1);
    load_refused(FX("init_fails"), "init failed");
    cr_assert_null(jr_registry_find(reg, "fx_init_fails"));
    cr_assert_eq(access(marker, F_OK), -1, "fini was called after a failed init");
}

Test(plugin, handler_names) {
    char long_ok[65], too_long[66];
    memset(long_ok, 'a', 64);
    long_ok[64] = '\0';
    memset(too_long, 'b', 65);
    too_long[65] = '\0';
    const char *bad[] = {"", too_long, "a/b", "a b", "caf\xc3\xa9", "tab\t", "semi;colon"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("JRT_HANDLER_NAME", bad[i], 1);
        err[0] = '\0';
        load_refused(FX("bad_name"), "invalid handler name");
    }
    setenv("JRT_HANDLER_NAME", "Az09_.:-", 1);
    load_ok(FX("bad_name"));
    cr_assert_not_null(jr_registry_find(reg, "Az09_.:-"));
    jr_registry_free(reg);
    reg = jr_registry_new();
    setenv("JRT_HANDLER_NAME", long_ok, 1);
    load_ok(FX("bad_name"));
    cr_assert_not_null(jr_registry_find(reg, long_ok));
}

/* ---- a refused plugin leaves the registry as it was ---- */

Test(plugin, refusals_leave_registry_unchanged) {
    load_ok(FX("good"));
    const jr_handler_t *ok = jr_registry_find(reg, "fx_ok");
    const char *refused[] = {"bad_magic", "bad_major", "newer_minor", "short_struct",
                             "no_entry",  "null_desc", "no_init",     "init_fails",
                             "dup_self",  "bad_name",  "dup_handler", "ignore_refusal",
                             "not_elf",   "good"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s.so", JRT_FIXTURE_DIR, refused[i]);
        int rc = jr_plugin_load(reg, path, err, sizeof err);
        cr_assert_eq(rc, JR_EPLUGIN, "%s was loaded", refused[i]);
        cr_assert_eq(jr_registry_plugins(reg), 1, "after %s", refused[i]);
        cr_assert_eq(jr_registry_handlers(reg), GOOD_HANDLERS, "after %s", refused[i]);
        cr_assert_eq(jr_registry_find(reg, "fx_ok"), ok, "after %s", refused[i]);
    }
    const char *gone[] = {"fx_dup_unique", "fx_init_fails", "fx_self", "fx_ignored"};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++)
        cr_assert_null(jr_registry_find(reg, gone[i]), "%s still registered", gone[i]);

    jr_job_t job = {.id = "1", .queue = "q", .handler = "fx_ok", .payload = "", .attempt = 1};
    cr_assert_eq(jr_handler_run(ok, &job), JR_RESULT_OK);
}

/* ---- file permissions ---- */

#define OTHER_UID 12345 /* a user who is neither root nor us */

/* jr_plugin_check_owner, a table of trees under tmpdir: "d" is a directory
 * in tmpdir, "d/p.so" the file checked. Runs as root in CI (chown needs it);
 * skipped otherwise. */
Test(plugin, ownership_rule_of_the_file_and_every_directory_above_it) {
    if (geteuid() != 0) cr_skip_test("needs root to chown");
    static const struct {
        const char *what;
        mode_t dmode, fmode;
        uid_t duid, fuid, as; /* owners, and the uid the check is for */
        const char *fails;    /* "" = passes; else in the reason (with the failing path) */
    } cases[] = {
        {"ours, private", 0755, 0644, 0, 0, 0, ""},
        {"file of the worker's user", 0755, 0644, 0, OTHER_UID, OTHER_UID, ""},
        {"directory of the worker's user", 0755, 0644, OTHER_UID, 0, OTHER_UID, ""},
        {"file owned by another user", 0755, 0644, 0, OTHER_UID, 0, "/d/p.so is owned by uid 12345"},
        {"directory owned by another user", 0755, 0644, OTHER_UID, 0, 0, "directory %s/d is owned by uid 12345"},
        {"file writable by group", 0755, 0664, 0, 0, 0, "/d/p.so is writable by group or others (mode 0664)"},
        {"file writable by others", 0755, 0646, 0, 0, 0, "writable by group or others (mode 0646)"},
        {"directory writable by group", 0775, 0644, 0, 0, 0, "directory %s/d is writable by group or others (mode 0775, no sticky bit)"},
        {"directory writable by all", 0777, 0644, 0, 0, 0, "directory %s/d is writable by group or others (mode 0777"},
        {"sticky directory writable by all (as /tmp)", 01777, 0644, 0, 0, 0, ""},
        {"sticky directory of another user", 01777, 0644, OTHER_UID, 0, 0, "directory %s/d is owned by uid 12345"},
        {"sticky does not excuse the file", 01777, 0666, 0, 0, 0, "/d/p.so is writable by group or others"},
    };
    make_tmpdir();
    char d[PATH_MAX], f[PATH_MAX], why[JR_ERRLEN], want[PATH_MAX + 128];
    snprintf(d, sizeof d, "%s/d", tmpdir);
    snprintf(f, sizeof f, "%s/d/p.so", tmpdir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mkdir(d, 0700);
        copy_file(FX("good"), f, cases[i].fmode);
        cr_assert_eq(chown(f, cases[i].fuid, 0), 0);
        cr_assert_eq(chown(d, cases[i].duid, 0), 0);
        cr_assert_eq(chmod(d, cases[i].dmode), 0);
        why[0] = '\0';
        int rc = jr_plugin_check_owner(f, cases[i].as, why, sizeof why);
        snprintf(want, sizeof want, cases[i].fails, tmpdir);
        if (!*want)
            cr_expect_eq(rc, 0, "%s: refused: %s", cases[i].what, why);
        else
            cr_expect(rc == -1 && strstr(why, want), "%s: rc %d, want \"%s\" in: %s", cases[i].what, rc, want, why);
        unlink(f);
        rmdir(d);
    }
    /* Not a regular file; a directory in the path that is not one. */
    cr_expect_eq(jr_plugin_check_owner(tmpdir, 0, why, sizeof why), -1);
    cr_expect(strstr(why, "is not a regular file"), "%s", why);
    /* A directory above, not the file's own, that others may write. */
    char a[PATH_MAX];
    snprintf(a, sizeof a, "%s/a", tmpdir);
    snprintf(d, sizeof d, "%s/a/b", tmpdir);
    snprintf(f, sizeof f, "%s/a/b/p.so", tmpdir);
    cr_assert_eq(mkdir(a, 0777), 0);
    cr_assert_eq(chmod(a, 0777), 0);
    cr_assert_eq(mkdir(d, 0755), 0);
    copy_file(FX("good"), f, 0644);
    cr_expect_eq(jr_plugin_check_owner(f, 0, why, sizeof why), -1);
    snprintf(want, sizeof want, "directory %s is writable by group or others (mode 0777, no sticky bit)", a);
    cr_expect(strstr(why, want), "want \"%s\" in: %s", want, why);
    cr_assert_eq(chmod(a, 0755), 0);
    cr_expect_eq(jr_plugin_check_owner(f, 0, why, sizeof why), 0, "%s", why);
    /* A relative path is not what realpath gives. */
    cr_expect_eq(jr_plugin_check_owner("p.so", 0, why, sizeof why), -1);
}

/* The loader applies the rule to what a symbolic link points to, before
 * dlopen (a refused file's constructors never run), and names the path. */
Test(plugin, refuses_files_another_user_could_replace) {
    if (geteuid() != 0) cr_skip_test("needs root to chown");
    make_tmpdir();
    char theirs[PATH_MAX], link[PATH_MAX], sub[PATH_MAX], inside[PATH_MAX + 16];
    snprintf(theirs, sizeof theirs, "%s", tmp_path("theirs.so"));
    copy_file(FX("good"), theirs, 0644);
    cr_assert_eq(chown(theirs, OTHER_UID, OTHER_UID), 0);
    load_refused(theirs, "theirs.so is owned by uid 12345");
    cr_expect(strstr(err, "refusing to load"), "%s", err);

    snprintf(link, sizeof link, "%s", tmp_path("link.so"));
    cr_assert_eq(symlink(theirs, link), 0);
    load_refused(link, "theirs.so is owned by uid 12345"); /* names the file it resolves to */

    snprintf(sub, sizeof sub, "%s", tmp_path("sub"));
    cr_assert_eq(mkdir(sub, 0755), 0);
    snprintf(inside, sizeof inside, "%s/good.so", sub);
    copy_file(FX("good"), inside, 0644);
    cr_assert_eq(chown(sub, OTHER_UID, OTHER_UID), 0);
    load_refused(inside, "/sub is owned by uid 12345");
    cr_assert_eq(jr_plugin_load_path(reg, sub, err, sizeof err), JR_EPLUGIN); /* a directory of plugins too */
    cr_expect(strstr(err, "/sub is owned by uid 12345"), "%s", err);

    cr_assert_eq(chown(sub, 0, 0), 0);
    cr_assert_eq(chmod(sub, 01777), 0); /* sticky, as /tmp: fine */
    load_ok(inside);
}

Test(plugin, refuses_file_writable_by_others) {
    make_tmpdir();
    const char *copy = tmp_path("good.so");
    copy_file(FX("good"), copy, 0666);
    int rc = jr_plugin_load(reg, copy, err, sizeof err);
    assert_refused(rc, copy, "writable by group or others (mode 0666); refusing to load");
    cr_assert_eq(jr_registry_plugins(reg), 0);

    cr_assert_eq(chmod(copy, 0620), 0);
    rc = jr_plugin_load(reg, copy, err, sizeof err);
    assert_refused(rc, copy, "writable by group or others (mode 0620)");

    cr_assert_eq(chmod(copy, 0644), 0);
    load_ok(copy);
    cr_assert_eq(jr_registry_handlers(reg), GOOD_HANDLERS);
}

Test(plugin, refuses_file_in_directory_writable_by_others) {
    make_tmpdir();
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", tmp_path("good.so"));
    copy_file(FX("good"), copy, 0644);
    cr_assert_eq(chmod(tmpdir, 0777), 0);
    int rc = jr_plugin_load(reg, copy, err, sizeof err);
    assert_refused(rc, copy, "is writable by group or others (mode 0777, no sticky bit); refusing to load");
    cr_assert_not_null(strstr(err, tmpdir), "%s", err);

    cr_assert_eq(chmod(tmpdir, 0700), 0);
    load_ok(copy);
}

/* ---- directories ---- */

Test(plugin, loads_directory_in_name_order) {
    make_tmpdir();
    copy_file(FX("good2"), tmp_path("b_good2.so"), 0644);
    copy_file(FX("good"), tmp_path("a_good.so"), 0644);
    /* Not "*.so", or hidden: must be skipped (they would be refused). */
    copy_file(FX("bad_magic"), tmp_path("c_bad.so.txt"), 0644);
    copy_file(FX("bad_magic"), tmp_path(".hidden.so"), 0644);
    copy_file(FX("bad_magic"), tmp_path("README"), 0644);
    char marker[PATH_MAX];
    snprintf(marker, sizeof marker, "%s", tmp_path("fini"));
    setenv("JRT_FINI_MARKER", marker, 1);

    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/", tmpdir); /* a trailing slash is fine */
    int rc = jr_plugin_load_path(reg, dir, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(jr_registry_plugins(reg), 2);
    cr_assert_eq(jr_registry_handlers(reg), GOOD_HANDLERS + GOOD2_HANDLERS);
    cr_assert_not_null(strstr(jr_registry_find(reg, "fx_ok")->plugin, "/a_good.so"));
    cr_assert_not_null(strstr(jr_registry_find(reg, "fx_stop")->plugin, "/b_good2.so"));

    /* fini runs in reverse load order. */
    jr_registry_free(reg);
    reg = NULL;
    char *m = slurp(marker);
    cr_assert_not_null(m);
    cr_assert_str_eq(m, "good2\ngood\n");
    free(m);
}

Test(plugin, directory_stops_at_first_refusal) {
    make_tmpdir();
    copy_file(FX("good"), tmp_path("a_good.so"), 0644);
    copy_file(FX("bad_magic"), tmp_path("b_bad.so"), 0644);
    copy_file(FX("good2"), tmp_path("c_good2.so"), 0644);
    int rc = jr_plugin_load_path(reg, tmpdir, err, sizeof err);
    char bad[PATH_MAX];
    snprintf(bad, sizeof bad, "%s", tmp_path("b_bad.so"));
    assert_refused(rc, bad, "wrong magic");
    cr_assert_eq(jr_registry_plugins(reg), 1);
    cr_assert_not_null(jr_registry_find(reg, "fx_ok"));
    cr_assert_null(jr_registry_find(reg, "fx_stop"));
}

Test(plugin, empty_directory_is_fine) {
    make_tmpdir();
    cr_assert_eq(jr_plugin_load_path(reg, tmpdir, err, sizeof err), 0, "%s", err);
    cr_assert_eq(jr_registry_plugins(reg), 0);
}

Test(plugin, load_path_of_a_file) {
    cr_assert_eq(jr_plugin_load_path(reg, FX("good"), err, sizeof err), 0, "%s", err);
    cr_assert_eq(jr_registry_handlers(reg), GOOD_HANDLERS);
    int rc = jr_plugin_load_path(reg, FX("nope"), err, sizeof err);
    assert_refused(rc, FX("nope"), "No such file or directory");
}

/* ---- running handlers ---- */

static jr_job_t job_for(const char *handler, const char *payload, size_t len) {
    jr_job_t j = {.id = "1700000000000-0", .queue = "emails", .handler = handler,
                  .payload = payload, .payload_len = len, .attempt = 1};
    return j;
}

static jr_result_t run(jr_job_t *job) {
    const jr_handler_t *h = jr_registry_find(reg, job->handler);
    cr_assert_not_null(h, "no handler %s", job->handler);
    return jr_handler_run(h, job);
}

Test(plugin, run_ok_resets_outputs) {
    load_ok(FX("good"));
    jr_job_t job = job_for("fx_ok", "", 0);
    strcpy(job.error, "stale");
    job.retry_after_ms = 99;
    cr_assert_eq(run(&job), JR_RESULT_OK);
    cr_assert_str_eq(job.error, "");
    cr_assert_eq(job.retry_after_ms, -1);
}

Test(plugin, run_fail_with_error) {
    load_ok(FX("good"));
    jr_job_t job = job_for("fx_fail", "", 0);
    cr_assert_eq(run(&job), JR_RESULT_FAIL);
    cr_assert_str_eq(job.error, "fx_fail: boom");
}

Test(plugin, run_retry_after) {
    load_ok(FX("good"));
    jr_job_t job = job_for("fx_retry", "", 0);
    cr_assert_eq(run(&job), JR_RESULT_RETRY);
    cr_assert_eq(job.retry_after_ms, 1234);
    cr_assert_str_eq(job.error, "fx_retry: later");
}

Test(plugin, run_sees_job_through_api) {
    load_ok(FX("good"));
    jr_job_t job = job_for("fx_inspect", "ab\0cd", 5);
    job.attempt = 3;
    job.deadline_ms = 4102444800000;
    cr_assert_eq(run(&job), JR_RESULT_OK);
    char want[256];
    snprintf(want, sizeof want,
             "id=1700000000000-0 queue=emails attempt=3 deadline=4102444800000 len=5 nul=1 "
             "byte3=c api=%zu udata=inspect-udata",
             sizeof(jr_host_api_t));
    cr_assert_str_eq(job.error, want);
}

Test(plugin, run_null_payload_is_empty) {
    load_ok(FX("good"));
    jr_job_t job = job_for("fx_inspect", NULL, 0);
    cr_assert_eq(run(&job), JR_RESULT_OK);
    cr_assert_not_null(strstr(job.error, "len=0 nul=1 byte3=-"), "%s", job.error);
}

Test(plugin, run_invalid_result_is_fail) {
    load_ok(FX("good"));
    jr_job_t job = job_for("fx_bogus", "", 0);
    cr_assert_eq(run(&job), JR_RESULT_FAIL);
    cr_assert_not_null(strstr(job.error, "fx_bogus returned 7"), "%s", job.error);
}

Test(plugin, register_outside_init_fails) {
    load_ok(FX("good2"));
    jr_job_t job = job_for("fx_late", "", 0);
    cr_assert_eq(run(&job), JR_RESULT_OK, "%s", job.error);
    cr_assert_null(jr_registry_find(reg, "fx_late2"));
    cr_assert_eq(jr_registry_handlers(reg), GOOD2_HANDLERS);
}

Test(plugin, should_stop_flag_and_deadline) {
    load_ok(FX("good2"));
    jr_job_t job = job_for("fx_stop", "", 0);
    cr_assert_eq(run(&job), JR_RESULT_OK);
    volatile int stop = 0;
    job.stop_flag = &stop;
    cr_assert_eq(run(&job), JR_RESULT_OK);
    stop = 1;
    cr_assert_eq(run(&job), JR_RESULT_RETRY);
    stop = 0;
    job.deadline_mono_us = 1; /* long past */
    cr_assert_eq(run(&job), JR_RESULT_RETRY);
    job.deadline_mono_us = INT64_MAX;
    cr_assert_eq(run(&job), JR_RESULT_OK);
    /* the deadline is kept on the monotonic clock: the wall-clock one
     * (api->job_deadline_ms) in the past, as after a step of the host's
     * clock, stops nothing */
    job.deadline_ms = 1;
    cr_assert_eq(run(&job), JR_RESULT_OK);
}

/* ---- the example plugins ---- */

static int64_t now_ms(int clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Send stderr (where api->log writes) to a file until capture_end. */
static char cap_path[64];
static int cap_saved = -1;

static void capture_start(void) {
    snprintf(cap_path, sizeof cap_path, "/tmp/jrt_log_XXXXXX");
    int fd = mkstemp(cap_path);
    cr_assert_geq(fd, 0);
    fflush(stderr);
    cap_saved = dup(2);
    dup2(fd, 2);
    close(fd);
}

static char *capture_end(void) {
    fflush(stderr);
    dup2(cap_saved, 2);
    close(cap_saved);
    char *s = slurp(cap_path);
    unlink(cap_path);
    cr_assert_not_null(s);
    return s;
}

static void load_examples(void) {
    int rc = jr_plugin_load_path(reg, JRT_PLUGIN_DIR, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
}

Test(plugin, example_plugins_load) {
    load_examples();
    cr_assert_geq(jr_registry_plugins(reg), 3);
    cr_assert_not_null(jr_registry_find(reg, "echo"));
    cr_assert_not_null(jr_registry_find(reg, "sleep"));
    cr_assert_not_null(jr_registry_find(reg, "order_autoclose"));
}

Test(plugin, echo_logs_payload_safely) {
    load_examples();
    jr_job_t job = job_for("echo", "hello\nw\\orld\x01", 13);
    capture_start();
    jr_result_t res = run(&job);
    char *out = capture_end();
    cr_assert_eq(res, JR_RESULT_OK);
    cr_assert_not_null(strstr(out, "echo: hello\\x0aw\\x5corld\\x01"), "%s", out);
    cr_assert_not_null(strstr(out, "job=1700000000000-0"), "%s", out);
    cr_assert_not_null(strstr(out, "queue=emails"), "%s", out);
    cr_assert_not_null(strstr(out, "handler=echo"), "%s", out);
    cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "one line: %s", out);
    free(out);
}

Test(plugin, echo_truncates_long_payload) {
    load_examples();
    char big[300];
    memset(big, 'x', sizeof big);
    jr_job_t job = job_for("echo", big, sizeof big);
    capture_start();
    jr_result_t res = run(&job);
    char *out = capture_end();
    cr_assert_eq(res, JR_RESULT_OK);
    cr_assert_not_null(strstr(out, "... (300 bytes)"), "%s", out);
    cr_assert_null(strstr(out, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                               "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                               "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
                  "more than 200 bytes shown");
    free(out);
}

Test(plugin, sleep_waits) {
    load_examples();
    jr_job_t job = job_for("sleep", "", 0);
    cr_assert_eq(run(&job), JR_RESULT_OK);
    job = job_for("sleep", " 20\n", 4);
    cr_assert_eq(run(&job), JR_RESULT_OK, "%s", job.error);
    job = job_for("sleep", "120", 3);
    int64_t t0 = now_ms(CLOCK_MONOTONIC);
    cr_assert_eq(run(&job), JR_RESULT_OK, "%s", job.error);
    cr_assert_geq(now_ms(CLOCK_MONOTONIC) - t0, 120);
}

Test(plugin, sleep_rejects_non_numbers) {
    load_examples();
    const char *bad[] = {"abc", "12x", "-5", "1.5", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        jr_job_t job = job_for("sleep", bad[i], strlen(bad[i]));
        cr_assert_eq(run(&job), JR_RESULT_FAIL, "%s", bad[i]);
        cr_assert_str_eq(job.error, "payload must be a number of milliseconds");
    }
}

Test(plugin, sleep_stops_when_asked) {
    load_examples();
    jr_job_t job = job_for("sleep", "60000", 5);
    volatile int stop = 1;
    job.stop_flag = &stop;
    int64_t t0 = now_ms(CLOCK_MONOTONIC);
    cr_assert_eq(run(&job), JR_RESULT_RETRY);
    cr_assert_str_eq(job.error, "interrupted");
    cr_assert_lt(now_ms(CLOCK_MONOTONIC) - t0, 1000);

    stop = 0;
    job.deadline_ms = now_ms(CLOCK_REALTIME) + 100;
    job.deadline_mono_us = (now_ms(CLOCK_MONOTONIC) + 100) * 1000;
    t0 = now_ms(CLOCK_MONOTONIC);
    cr_assert_eq(run(&job), JR_RESULT_RETRY);
    int64_t took = now_ms(CLOCK_MONOTONIC) - t0;
    cr_assert(took >= 50 && took < 2000, "took %lld ms", (long long)took);
}

Test(plugin, order_autoclose_closes_unpaid_order) {
    load_examples();
    make_tmpdir();
    char prefix[PATH_MAX], placed[PATH_MAX + 8], closed[PATH_MAX + 8];
    snprintf(prefix, sizeof prefix, "%s", tmp_path("o1"));
    snprintf(placed, sizeof placed, "%s.placed", prefix);
    snprintf(closed, sizeof closed, "%s.closed", prefix);
    touch(placed);

    jr_job_t job = job_for("order_autoclose", prefix, strlen(prefix));
    capture_start();
    jr_result_t res = run(&job);
    char *out = capture_end();
    cr_assert_eq(res, JR_RESULT_OK, "%s", job.error);
    cr_assert_not_null(strstr(out, "order o1 unpaid after its deadline: closed"), "%s", out);
    free(out);
    cr_assert_eq(access(placed, F_OK), -1);
    cr_assert_eq(access(closed, F_OK), 0);

    /* Again (a job may run twice): nothing to do. */
    capture_start();
    res = run(&job);
    out = capture_end();
    cr_assert_eq(res, JR_RESULT_OK, "%s", job.error);
    cr_assert_not_null(strstr(out, "order o1 already closed"), "%s", out);
    free(out);
    cr_assert_eq(access(closed, F_OK), 0);
}

Test(plugin, order_autoclose_leaves_paid_order) {
    load_examples();
    make_tmpdir();
    char prefix[PATH_MAX], paid[PATH_MAX + 8];
    snprintf(prefix, sizeof prefix, "%s", tmp_path("o2"));
    snprintf(paid, sizeof paid, "%s.paid", prefix);
    touch(paid);
    jr_job_t job = job_for("order_autoclose", prefix, strlen(prefix));
    capture_start();
    jr_result_t res = run(&job);
    char *out = capture_end();
    cr_assert_eq(res, JR_RESULT_OK, "%s", job.error);
    cr_assert_not_null(strstr(out, "order o2 was paid: nothing to do"), "%s", out);
    free(out);
    cr_assert_eq(access(paid, F_OK), 0);
    cr_assert_eq(access(tmp_path("o2.closed"), F_OK), -1);
}

Test(plugin, order_autoclose_missing_order_is_retried) {
    load_examples();
    make_tmpdir();
    char prefix[PATH_MAX];
    snprintf(prefix, sizeof prefix, "%s", tmp_path("o3"));
    jr_job_t job = job_for("order_autoclose", prefix, strlen(prefix));
    cr_assert_eq(run(&job), JR_RESULT_RETRY);
    cr_assert_not_null(strstr(job.error, "No such file or directory"), "%s", job.error);
    cr_assert_not_null(strstr(job.error, "o3"), "%s", job.error);
}

Test(plugin, order_autoclose_bad_payload_fails) {
    load_examples();
    jr_job_t job = job_for("order_autoclose", "", 0);
    cr_assert_eq(run(&job), JR_RESULT_FAIL);
    cr_assert_not_null(strstr(job.error, "payload must be an order path prefix"), "%s", job.error);

    job = job_for("order_autoclose", "a\0b", 3);
    cr_assert_eq(run(&job), JR_RESULT_FAIL);

    static char big[PATH_MAX + 1];
    memset(big, 'a', PATH_MAX);
    job = job_for("order_autoclose", big, PATH_MAX);
    cr_assert_eq(run(&job), JR_RESULT_FAIL);
    cr_assert_not_null(strstr(job.error, "too long"), "%s", job.error);
}

/* ---- per-runner hooks ---- */

Test(plugin, runner_hooks_run_in_order_once_each) {
    make_tmpdir();
    char marker[PATH_MAX];
    snprintf(marker, sizeof marker, "%s", tmp_path("hooks"));
    setenv("JRT_HOOK_MARKER", marker, 1);
    unsetenv("JRT_HOOK_FAIL");
    load_ok(FX("hooks"));
    const jr_handler_t *h = jr_registry_find(reg, "fx_hooked");
    jr_job_t job = job_for("fx_hooked", "", 0);
    cr_assert_eq(jr_handler_run(h, &job), JR_RESULT_FAIL, "init alone must not call runner_init");
    jr_registry_runner_init(reg);
    cr_assert_eq(jr_handler_ready(reg, h, err, sizeof err), 0, "%s", err);
    cr_assert_eq(jr_handler_run(h, &job), JR_RESULT_OK, "%s", job.error);
    jr_registry_runner_exit(reg);
    jr_registry_runner_exit(reg); /* a second exit calls nothing */
    char *text = slurp(marker);
    cr_assert_str_eq(text, "init\nexit\n");
    free(text);
}

Test(plugin, a_failing_runner_init_is_retried_before_each_job_until_it_works) {
    make_tmpdir();
    char marker[PATH_MAX];
    snprintf(marker, sizeof marker, "%s", tmp_path("hooks"));
    setenv("JRT_HOOK_MARKER", marker, 1);
    setenv("JRT_HOOK_FAIL", "2", 1);
    load_ok(FX("hooks"));
    const jr_handler_t *h = jr_registry_find(reg, "fx_hooked");
    jr_registry_runner_init(reg); /* fails: 1st call */
    cr_assert_neq(jr_handler_ready(reg, h, err, sizeof err), 0); /* fails: 2nd call */
    cr_assert_str_eq(err, "runner_init of plugin hooks failed (returned 5)");
    cr_assert_eq(jr_handler_ready(reg, h, err, sizeof err), 0, "%s", err); /* 3rd works */
    cr_assert_eq(jr_handler_ready(reg, h, err, sizeof err), 0, "%s", err); /* not called again */
    jr_registry_runner_exit(reg);
    char *text = slurp(marker);
    cr_assert_str_eq(text, "init\ninit\ninit\nexit\n");
    free(text);
    unsetenv("JRT_HOOK_FAIL");
}

/* ---- ABI 1.2: api->enqueue, and older minors beside it ---- */

Test(plugin, accepts_a_minor_1_plugin_beside_minor_2_and_runs_its_hooks) {
    load_ok(FX("minor1"));
    const jr_handler_t *h = jr_registry_find(reg, "fx_minor1");
    cr_assert_not_null(h);
    jr_registry_runner_init(reg);
    jr_job_t j = job_for("fx_minor1", "", 0);
    cr_expect_eq(run(&j), JR_RESULT_OK, "%s", j.error);
    jr_registry_runner_exit(reg);
}

/* ---- ABI 1.3: api->set_result, and a 1.2 plugin beside it ---- */

Test(plugin, accepts_a_minor_2_plugin_on_a_minor_3_host) {
    load_ok(FX("enqueue")); /* built for 1.2: no set_result in its table */
    jr_fu_list_t fu = {.max_payload = 1 << 20};
    jr_job_t j = job_for("fx_enqueue_ok", "", 0);
    j.fu = &fu;
    cr_expect_eq(run(&j), JR_RESULT_OK, "%s", j.error);
    jr_fu_reset(&fu);
}

Test(plugin, set_result_keeps_up_to_the_maximum_and_refuses_more_without_cutting) {
    load_ok(FX("result"));
    static char out[JR_RESULT_MAX];
    uint32_t len = 7;
    jr_job_t j = job_for("fx_result_max", "", 0);
    j.result = out, j.result_len = &len;
    cr_assert_eq(run(&j), JR_RESULT_OK, "%s", j.error);
    cr_expect_eq(len, JR_RESULT_MAX);
    cr_expect(out[0] == 'r' && out[JR_RESULT_MAX - 1] == 'r');
    j = job_for("fx_result_big", "", 0);
    j.result = out, j.result_len = &len;
    cr_assert_eq(run(&j), JR_RESULT_OK, "a result over the maximum must be refused with -1");
    cr_expect(len == 5 && !memcmp(out, "small", 5), "the refused call left the result as it was (%u bytes)", len);
    j = job_for("fx_result_null", "", 0);
    j.result = out, j.result_len = &len;
    cr_expect_eq(run(&j), JR_RESULT_OK, "NULL data with a length must be refused");
    cr_expect_eq(len, 0, "each run starts without a result");
    j = job_for("fx_result_clear", "", 0);
    j.result = out, j.result_len = &len;
    cr_expect_eq(run(&j), JR_RESULT_OK);
    cr_expect_eq(len, 0, "a result of 0 bytes clears it");
    j = job_for("fx_result_max", "", 0); /* nowhere to put it (j.result NULL): refused */
    cr_expect_eq(run(&j), JR_RESULT_FAIL);
}

Test(plugin, enqueue_keeps_follow_ups_with_the_attempt) {
    load_ok(FX("enqueue"));
    jr_fu_list_t fu = {.max_payload = 1 << 20};
    jr_job_t j = job_for("fx_enqueue_ok", "", 0);
    j.fu = &fu;
    cr_assert_eq(run(&j), JR_RESULT_OK, "%s", j.error);
    cr_assert_eq(fu.n, 2);
    size_t off = 0;
    jr_fu_item_t it;
    cr_assert_eq(jr_fu_next(fu.buf, fu.len, &off, &it), 1);
    cr_expect(it.queue_len == 6 && !memcmp(it.queue, "emails", 6), "no queue: the job's own");
    cr_expect(it.payload_len == 1 && it.payload[0] == 'a' && it.id_len == 0);
    cr_assert_eq(jr_fu_next(fu.buf, fu.len, &off, &it), 1);
    cr_expect(it.queue_len == 5 && !memcmp(it.queue, "other", 5));
    cr_expect(it.id_len == 3 && !memcmp(it.id, "b-1", 3) && it.delay_ms == 5000 && it.payload_len == 0);
    cr_expect_eq(jr_fu_next(fu.buf, fu.len, &off, &it), 0);
    jr_fu_reset(&fu);
}

Test(plugin, ok_after_a_refused_enqueue_is_a_failure_with_the_reason) {
    load_ok(FX("enqueue"));
    jr_fu_list_t fu = {.max_payload = 1 << 20};
    jr_job_t j = job_for("fx_enqueue_bad", "", 0);
    j.fu = &fu;
    cr_expect_eq(run(&j), JR_RESULT_FAIL);
    cr_expect(strstr(j.error, "follow-up refused: no handler name"), "error: %s", j.error);
    cr_expect_eq(fu.refused, 1);
    jr_fu_reset(&fu);
    /* Without a list (not a handler run by a worker): refused, not kept. */
    jr_job_t k = job_for("fx_enqueue_ok", "", 0);
    cr_expect_eq(run(&k), JR_RESULT_FAIL);
    cr_expect(strstr(k.error, "not available"), "error: %s", k.error);
}

/* ---- ABI 1.2: api->setting ---- */

Test(plugin, a_plugin_reads_its_settings_from_the_file_and_the_environment_first) {
    static char *v[] = {"cfg-fx", "handler", "fx_from_file", "other", "in-runner", "not mine",
                        "cfg-fx", "in-runner", "runner value"};
    jr_strlist_t settings = {.v = v, .n = 9};
    jr_registry_set_settings(reg, &settings);
    load_ok(FX("settings"));
    cr_expect_not_null(jr_registry_find(reg, "fx_from_file"), "init did not read plugin_settings.cfg-fx.handler");
    jr_registry_runner_init(reg);
    jr_job_t j = job_for("fx_from_file", "", 0);
    run(&j);
    cr_expect_str_eq(j.error, "runner value", "runner_init read another plugin's setting or none");
    jr_registry_runner_exit(reg);

    jr_registry_free(reg);
    reg = jr_registry_new();
    jr_registry_set_settings(reg, &settings);
    setenv("JOBRUNNER_PLUGIN_CFG_FX_HANDLER", "fx_from_env", 1);
    load_ok(FX("settings"));
    unsetenv("JOBRUNNER_PLUGIN_CFG_FX_HANDLER");
    cr_expect_not_null(jr_registry_find(reg, "fx_from_env"), "the environment does not override the file");

    jr_registry_free(reg);
    reg = jr_registry_new(); /* no settings at all */
    load_ok(FX("settings"));
    cr_expect_not_null(jr_registry_find(reg, "fx_unset"), "an unset setting is not NULL");
}
