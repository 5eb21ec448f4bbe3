BEGIN
{
	@a = count(1);
	@b = sum();
	@c = lquantize(arg0, 0, 100);
	@c2 = lquantize(arg0, 100, 0, 10);
	@d = lquantize(arg0, 0, pid, 10);
	@e = llquantize(arg0, 10, 0, 6, 7);
	@f = quantize(execname);
	@g = count();
	@g = sum(1);
	@h[pid] = count();
	@h[pid, tid] = count();
	@i = cnt();
	x = count();
	printa(@nosuch);
	clear(@g, 1);
	y = @g;
}
