syscall::read:entry
{
	a = args[3];
	b = args->nosuch;
	c = args[pid];
}

sched:::sched_switch
{
	d = args[0];
	e = args->prev_pidd;
}

BEGIN
{
	f = args[0];
	g = curthread->pid;
}

syscall::read:entry, syscall::openat:entry
{
	h = args[2]; // size_t and int meet as int64_t: accepted
}
