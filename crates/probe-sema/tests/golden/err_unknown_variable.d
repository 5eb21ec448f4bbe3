BEGIN
{
	x = pdi;
	y = self->strt;
	z = this->nope;
	trace(timestmap);
	q = unknown_array["k"];
	r = args;
}
