sched:::sched_switch
/args->prev_pid != 0/
{
	@switches[args->prev_comm] = count();
	@prio = lquantize(args->next_prio, 0, 140, 10);
}

sched:::sched_process_exec
{
	printf("%s %d %d\n", args->filename, args->pid, args->old_pid);
}

syscall::openat:entry
{
	printf("%s %d\n", copyinstr((uintptr_t)args[1]), args[2]);
	trace(args->flags);
}

syscall::read:entry
{
	@bytes[execname] = sum(args[2]);
	@fds = quantize(args[0]);
}

python:::function__entry
{
	@py[copyinstr(arg1), args[2]] = count();
}
