// Go-live guest (issue 13): the running sum of numbers read from stdin, waiting on an epoll set
// rather than in read. The set holds stdin (data 0x5eed), an inotify instance watching the
// directory argv[1] for created files (data 0x1d07), and a timerfd armed with a 1000 s interval
// (data 0x71e4, never due in a test). A line `touch` creates argv[1]/made, and the program waits
// for the inotify event of it through the epoll set. At end of input it prints the timer's
// interval as timerfd_gettime reports it. Gone live, each of these works only if the epoll
// interests, the inotify watch and the timer's setting were rebuilt.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>

static int wait_for(int ep, unsigned long want) {
    struct epoll_event ev;
    for (;;) {
        int n = epoll_wait(ep, &ev, 1, -1);
        if (n < 0)
            return -1;
        // Level-triggered: stdin may stay ready while the inotify event is awaited.
        if (n == 1 && ev.data.u64 == want)
            return 0;
        if (n == 1 && ev.data.u64 != 0x5eed && ev.data.u64 != 0x1d07)
            printf("unexpected data %lx\n", (unsigned long)ev.data.u64);
    }
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    setvbuf(stdout, NULL, _IONBF, 0);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    int wd = inotify_add_watch(in, dir, IN_CREATE);
    int tf = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct itimerspec its = {.it_interval = {1000, 0}, .it_value = {1000, 0}};
    if (ep < 0 || in < 0 || wd < 0 || tf < 0 || timerfd_settime(tf, 0, &its, NULL) < 0)
        return 2;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0x5eed};
    epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev);
    ev.data.u64 = 0x1d07;
    epoll_ctl(ep, EPOLL_CTL_ADD, in, &ev);
    ev.data.u64 = 0x71e4;
    epoll_ctl(ep, EPOLL_CTL_ADD, tf, &ev);
    // A registration changed and one removed: the rebuilt set must be the final one.
    ev.events = EPOLLIN | EPOLLOUT;
    epoll_ctl(ep, EPOLL_CTL_ADD, 1, &ev);
    epoll_ctl(ep, EPOLL_CTL_DEL, 1, NULL);
    printf("ready wd %d\n", wd);
    long sum = 0;
    char line[256];
    size_t have = 0;
    for (;;) {
        if (wait_for(ep, 0x5eed) < 0)
            return 3;
        ssize_t n = read(0, line + have, sizeof line - 1 - have);
        if (n <= 0)
            break;
        have += n;
        line[have] = 0;
        char *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = 0;
            if (strcmp(line, "touch") == 0) {
                char path[4096];
                snprintf(path, sizeof path, "%s/made", dir);
                close(open(path, O_CREAT | O_WRONLY, 0644));
                if (wait_for(ep, 0x1d07) < 0)
                    return 4;
                char buf[4096] __attribute__((aligned(8)));
                ssize_t m = read(in, buf, sizeof buf);
                struct inotify_event *e = (struct inotify_event *)buf;
                printf("inotify wd %d %s %s\n", m > 0 ? e->wd : -1,
                       m > 0 && (e->mask & IN_CREATE) ? "created" : "?", m > 0 ? e->name : "");
            } else {
                sum += atol(line);
                printf("sum %ld\n", sum);
            }
            size_t used = (size_t)(nl - line) + 1;
            memmove(line, nl + 1, have - used + 1);
            have -= used;
        }
    }
    struct itimerspec now;
    timerfd_gettime(tf, &now);
    printf("end %ld timer interval %ld\n", sum, (long)now.it_interval.tv_sec);
    return 0;
}
