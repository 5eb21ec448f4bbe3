/*
 * The flight recorder's crash report (`-x bufpolicy=ring` with -c or -p; docs/d-reference.md,
 * "bufpolicy"): appended to the program by `sightline probe`. When the target takes a
 * core-dumping signal it does not handle (SIG_DFL), its thread records the signal, the fault
 * address and its user stack; the consumer prints this after every CPU's ring.
 */
signal:::signal_deliver
/pid == $target && args->sa_handler == 0 && (args->sig == 7 || args->sig == 11)/
{
	printf("\nsightline: pid %d (%s) died of signal %d (%s), fault address 0x%x, in thread %d:\n",
	    pid, execname, args->sig, args->sig == 11 ? "SIGSEGV" : "SIGBUS",
	    curthread->thread.cr2, tid);
	ustack();
}

signal:::signal_deliver
/pid == $target && args->sa_handler == 0 && (args->sig == 3 || args->sig == 4 ||
    args->sig == 5 || args->sig == 6 || args->sig == 8 || args->sig == 24 ||
    args->sig == 25 || args->sig == 31)/
{
	printf("\nsightline: pid %d (%s) died of signal %d (%s), in thread %d:\n",
	    pid, execname, args->sig,
	    args->sig == 3 ? "SIGQUIT" : args->sig == 4 ? "SIGILL" : args->sig == 5 ? "SIGTRAP" :
	    args->sig == 6 ? "SIGABRT" : args->sig == 8 ? "SIGFPE" : args->sig == 24 ? "SIGXCPU" :
	    args->sig == 25 ? "SIGXFSZ" : "SIGSYS", tid);
	ustack();
}
