#!/usr/sbin/dtrace -s
#pragma D option quiet
#pragma D option bufsize=4m
int total;
self string name;
int counts[string, int];

syscall::read:entry,
syscall::write:entry
/pid == $target && execname != "bash"/
{
	self->ts = timestamp;
	this->n = arg2;
	counts[execname, 1]++;
	@[execname] = count();
	@bytes[probefunc, pid] = sum(arg2);
	@lat = quantize(this->n);
	@l = lquantize(arg0, 0, 100, 10);
	printf("%s %d\n", execname, args[0]);
	trace(args->prev_comm);
	printa("%s %@d\n", @bytes);
	if (x > 1) { trace(1); } else trace(2);
	if (y) z = 1;
	;
}

syscall::read:return
/self->ts/
{
	@t[probefunc] = avg(timestamp - self->ts);
	self->ts = 0
}

BEGIN { exit(0) }
profile:::tick-1s {}
tick-1s
pid$target:libc.so.6:malloc:entry { @m[ustack()] = count(); }
syscall::*read*:, sched:::sched_[sw]* ,:::END { }
