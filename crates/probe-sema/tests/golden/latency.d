#pragma D option quiet
syscall::read:entry
/execname == "gzip"/
{
	self->ts = timestamp;
	self->fd = args[0];
}

syscall::read:return
/self->ts/
{
	this->delta = timestamp - self->ts;
	@lat["read", self->fd] = quantize(this->delta);
	@lin = lquantize(this->delta / 1000, 0, 100, 10);
	@ll = llquantize(this->delta, 10, 0, 6, 20);
	@tot = sum(arg0);
	@mx = max(arg0);
	@mn = min(arg0);
	@av = avg(arg0);
	@sd = stddev(arg0);
	self->ts = 0;
}

END
{
	printa(@lat);
	normalize(@tot, 1000);
	trunc(@lat, 5);
	clear(@mx);
	denormalize(@tot);
}
