sched:::sched_switch
{
	@[args->prev_comm, args->next_pid] = count();
	x = (char)args->prev_prio;
	y = (unsigned char)1;
	z = (short int)2;
	w = (long long int)3;
	v = (char *)arg0;
	u = copyinstr((uintptr_t)args[1]);
	t = curthread->pid;
	s = a[1][2];
	r = stack(5);
	@agg = max(a.b.c);
	clear(@agg);
	printa(@);
	o = offsetof(struct task_struct, pid);
}
