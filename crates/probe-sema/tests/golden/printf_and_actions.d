BEGIN
{
	printf("%d %u %x %s %c %p\n", pid, uid, arg0, execname, 'a', arg1);
	printf("%-*d|%.*s\n", 10, pid, 3, execname);
	printf("%a %A\n", arg0, arg1);
	printf("%Y\n", walltimestamp);
	printf("plain text\n");
	trace(pid);
	trace(execname);
	trace("literal");
	stack();
	ustack(5);
	sym(arg0);
	@st[stack(), ustack()] = count();
	@fn[func(arg0), usym(arg1)] = count();
	tracemem(arg0, 16);
	x = strlen(execname) + rand();
	s = strjoin(execname, "-x");
	s = basename(s);
	s = substr(s, 1, 2);
	s = lltostr(pid);
	if (x > 10) {
		trace(1);
	} else if (x > 5) {
		trace(2);
	} else {
		trace(3);
	}
	spec = speculation();
	exit(0);
}
