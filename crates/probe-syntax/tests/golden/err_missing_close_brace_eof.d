BEGIN
{
	@calls[probefunc] = count()
