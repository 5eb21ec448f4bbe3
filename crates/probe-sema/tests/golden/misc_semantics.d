// target: 1234
// -x strsize=64
// -x aggsortkey
/* Declarations, strings, pointers, clause-locals across clauses, return probes, uprobes. */
int64_t total;
self string who;
this uint8_t small;

pid$target:a.out:main:entry
{
	self->who = execname;
	this->small = 300;
	total += args[0];
	@args[args[5]] = count();
}

pid$target:a.out:main:return
/self->who != "" && self->who < "zzz"/
{
	printf("%s returned %d\n", self->who, args[1]);
	self->who = 0 ? "a" : "b";
}

syscall::read:return, syscall::pread64:return
/errno != 0 || arg0 < 0/
{
	@errs[probefunc, errno] = count();
	p = (int *)arg1;
	q = p + 2;
	n = q - p;
	b = *p;
	b = p[3];
	s = stringof((char *)arg1);
	s = (string)arg1;
	s = stringof arg1;
	@len = max(strlen(s));
}

BEGIN
{
	x = 1 ^^ 0;
	y = ~0u >> 1;
	z = (short)-1 < 0u;
	w = (unsigned char)255 + 1;
	trace(sizeof(string));
	exit(0);
}

syscall::openat:return
/errno == ENOENT || errno == EACCES/
{
	@missing[execname] = count();
}

signal:::signal_generate
/args->sig == SIGKILL/
{
	trace(args->pid);
}

syscall::read:entry, syscall::openat:entry
{
	/* args[2] is size_t for read, int for openat: the clause sees the 64-bit slot. */
	@third[probefunc, args[2]] = count();
}
