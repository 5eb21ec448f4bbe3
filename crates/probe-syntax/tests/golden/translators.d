struct in { int i; char c; };
struct out { int o : 3; long l; };
translator struct out < struct in *p > {
	o = p->i + 1;
	l = (long)p->c;
};
BEGIN { x = xlate < struct out > (curthread).o; y = xlate<struct out *>(0)->l; exit(0); }
