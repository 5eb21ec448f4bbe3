/*
 * `-x postmortem` (docs/d-reference.md, "postmortem"): appended to the program by `sightline
 * probe`, system-wide under the ring policy. When any process the script's predicates select
 * (PM_PREDICATE: the user's clauses' predicates joined with ||, or 1 when a clause has none)
 * takes a core-dumping signal it does not handle (SIG_DFL), its thread records the signal, the
 * fault address and its user stack and the run stops: the consumer prints every CPU's ring,
 * then this report.
 */
signal:::signal_deliver
/(PM_PREDICATE) && args->sa_handler == 0 && (args->sig == 7 || args->sig == 11)/
{
	printf("\nsightline: pid %d (%s) died of signal %d (%s), fault address 0x%x, in thread %d:\n",
	    pid, execname, args->sig, args->sig == 11 ? "SIGSEGV" : "SIGBUS",
	    curthread->thread.cr2, tid);
	ustack();
	exit(0);
}

signal:::signal_deliver
/(PM_PREDICATE) && args->sa_handler == 0 && (args->sig == 3 || args->sig == 4 ||
    args->sig == 5 || args->sig == 6 || args->sig == 8 || args->sig == 24 ||
    args->sig == 25 || args->sig == 31)/
{
	printf("\nsightline: pid %d (%s) died of signal %d (%s), in thread %d:\n",
	    pid, execname, args->sig,
	    args->sig == 3 ? "SIGQUIT" : args->sig == 4 ? "SIGILL" : args->sig == 5 ? "SIGTRAP" :
	    args->sig == 6 ? "SIGABRT" : args->sig == 8 ? "SIGFPE" : args->sig == 24 ? "SIGXCPU" :
	    args->sig == 25 ? "SIGXFSZ" : "SIGSYS", tid);
	ustack();
	exit(0);
}
