/*
 * weft fabric lab — /init of the guest's tiny initramfs (built by scripts/lab/run).
 *
 * Loads the modules listed in /modules.order (virtio_pci, 9pnet_virtio, 9p and
 * their dependencies, in dependency order), mounts the host's root file system
 * read-only over virtio-9p (root=<mount tag> rootflags=<9p options> from the
 * kernel command line) and executes init=<path> from it, passing on the
 * environment (unknown KEY=VAL kernel parameters arrive there).
 *
 * It replaces initramfs-tools' init, which spends ~4 s under TCG starting udev.
 * On failure it reports status 125 through isa-debug-exit (QEMU exits 251).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

static void fail(const char *what, const char *arg)
{
    fprintf(stderr, "LAB: initrd: %s %s: %s\n", what, arg ? arg : "", strerror(errno));
    if (ioperm(0xf4, 4, 1) == 0)
        outb(125, 0xf4);                 /* isa-debug-exit: QEMU exits 2*125+1 */
    reboot(RB_POWER_OFF);
    _exit(1);
}

/* Value of kernel parameter NAME ("name=") in CMDLINE, copied into BUF. */
static const char *param(const char *cmdline, const char *name, char *buf, size_t len)
{
    size_t n = strlen(name);
    const char *p = cmdline;
    while (*p) {
        while (*p == ' ')
            p++;
        if (strncmp(p, name, n) == 0 && p[n] == '=') {
            const char *v = p + n + 1;
            size_t l = strcspn(v, " \n");
            if (l >= len)
                l = len - 1;
            memcpy(buf, v, l);
            buf[l] = 0;
            return buf;
        }
        p += strcspn(p, " ");
    }
    return NULL;
}

int main(void)
{
    static char cmdline[4096], tag[256], opts[1024], fstype[64], init[1024], line[512];

    mkdir("/dev", 0755);
    mkdir("/proc", 0755);
    if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) != 0)
        fail("mount", "/dev");
    int fd = open("/dev/console", O_RDWR);
    if (fd >= 0) {
        dup2(fd, 0); dup2(fd, 1); dup2(fd, 2);
        if (fd > 2)
            close(fd);
    }
    if (mount("proc", "/proc", "proc", 0, NULL) != 0)
        fail("mount", "/proc");

    FILE *f = fopen("/proc/cmdline", "r");
    if (!f || !fgets(cmdline, sizeof cmdline, f))
        fail("read", "/proc/cmdline");
    fclose(f);
    if (!param(cmdline, "root", tag, sizeof tag))
        strcpy(tag, "hostroot");
    if (!param(cmdline, "rootfstype", fstype, sizeof fstype))
        strcpy(fstype, "9p");
    if (!param(cmdline, "rootflags", opts, sizeof opts))
        strcpy(opts, "trans=virtio,version=9p2000.L,msize=262144");
    if (!param(cmdline, "init", init, sizeof init))
        strcpy(init, "/sbin/init");

    f = fopen("/modules.order", "r");
    if (!f)
        fail("open", "/modules.order");
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0])
            continue;
        int m = open(line, O_RDONLY | O_CLOEXEC);
        if (m < 0)
            fail("open", line);
        if (syscall(SYS_finit_module, m, "", 0) != 0 && errno != EEXIST)
            fail("finit_module", line);
        close(m);
    }
    fclose(f);

    mkdir("/root", 0755);
    if (mount(tag, "/root", fstype, MS_RDONLY, opts) != 0)
        fail("mount root", tag);
    /* Hand /dev and /proc over to the real root; guest-init mounts the rest. */
    if (mount("/dev", "/root/dev", NULL, MS_MOVE, NULL) != 0)
        fail("move", "/dev");
    if (mount("/proc", "/root/proc", NULL, MS_MOVE, NULL) != 0)
        fail("move", "/proc");
    if (chdir("/root") != 0 || mount(".", "/", NULL, MS_MOVE, NULL) != 0 || chroot(".") != 0
        || chdir("/") != 0)
        fail("switch root to", tag);

    char *argv[] = { init, NULL };
    execve(init, argv, environ);
    fail("exec", init);
    return 1;
}
