webserver:::request
{
	printf("%s %d %d\n", args[0], args[1], args[2]);
	@paths[args[0]] = sum(args[1]);
	self->len = strlen(args[0]);
	trace(arg0);
}
