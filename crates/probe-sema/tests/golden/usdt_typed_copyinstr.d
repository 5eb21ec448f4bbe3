webserver:::request
{
	trace(copyinstr(args[0]));
}
