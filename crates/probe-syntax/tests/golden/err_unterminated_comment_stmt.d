BEGIN
{
	trace(1 /* never closed
