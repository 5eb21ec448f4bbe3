/* The guide's speculation pattern ("Speculative Tracing" → "Speculation Example"). */
syscall::openat:entry
{
	self->spec = speculation();
	speculate(self->spec);
	printf("%s\n", copyinstr(arg1));
}

syscall::openat:return
/self->spec && errno != 0/
{
	commit(self->spec);
	self->spec = 0;
}

syscall::openat:return
/self->spec && errno == 0/
{
	discard(self->spec);
	self->spec = 0;
}
