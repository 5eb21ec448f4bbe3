syscall::read:entry
{
	self->spec = speculation();
}

syscall::read:return
/self->spec/
{
	speculate(self->spec);
	printf("speculative %d\n", arg0);
}

syscall::write:entry
/self->spec/
{
	trace(arg0);
	speculate(self->spec);
	speculate(self->spec);
	@n = count();
	exit(0);
}

syscall::write:return
/self->spec/
{
	commit(self->spec);
	printf("after commit\n");
	self->spec = 0;
}

syscall::close:entry
/self->spec/
{
	speculate(self->spec);
	commit(self->spec);
}

syscall::close:return
/self->spec/
{
	printf("before commit\n");
	commit(self->spec);
}
