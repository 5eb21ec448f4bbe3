/* Inlines (guide: "Type and Constant Definitions"): constants and expressions, expanded at each use. */
inline int LIMIT = 100;
inline string SHELL = "bash";
inline uint64_t NOW_US = timestamp / 1000;
inline int TWICE = LIMIT * 2;

syscall::read:entry
/execname == SHELL && arg2 > TWICE/
{
	@big[execname] = lquantize(arg2, 0, LIMIT, 10);
	t = NOW_US;
}
