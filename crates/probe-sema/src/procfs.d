/*
 * Sightline's built-in D library: the Solaris process model types that DTrace scripts use
 * (psinfo_t, lwpsinfo_t, curpsinfo, curlwpsinfo; DTrace guide, "Translators" -> "Stable
 * Translations", proc(4)), translated from the Linux task_struct read through kernel BTF.
 * The analysis loads it when a program names one of its identifiers (probe-sema
 * analyze/procfs.rs); the parser knows psinfo_t and lwpsinfo_t as type names.
 * Members DTrace for Linux does not translate either (pr_size, pr_rssize, pr_pctcpu,
 * pr_pctmem, pr_nice, pr_oldpri, pr_cpu, times) are left out: reading one is D_XLATE_NOCONV.
 */

struct lwpsinfo {
	int pr_flag;
	int pr_lwpid;
	uintptr_t pr_addr;
	uintptr_t pr_wchan;
	char pr_stype;
	char pr_state;
	char pr_sname;
	char pr_nice;
	short pr_syscall;
	char pr_oldpri;
	char pr_cpu;
	int pr_pri;
	unsigned short pr_pctcpu;
	char pr_clname[8];
	char pr_name[16];
	int pr_onpro;
	int pr_bindpro;
	int pr_bindpset;
	int pr_lgrp;
};

struct psinfo {
	int pr_flag;
	int pr_nlwp;
	int pr_pid;
	int pr_ppid;
	int pr_pgid;
	int pr_sid;
	unsigned int pr_uid;
	unsigned int pr_euid;
	unsigned int pr_gid;
	unsigned int pr_egid;
	uintptr_t pr_addr;
	size_t pr_size;
	size_t pr_rssize;
	struct tty_struct *pr_ttydev;
	unsigned short pr_pctcpu;
	unsigned short pr_pctmem;
	char pr_fname[16];
	char pr_psargs[80];
	int pr_wstat;
	int pr_argc;
	uintptr_t pr_argv;
	uintptr_t pr_envp;
	char pr_dmodel;
	int pr_taskid;
	int pr_projid;
	int pr_nzomb;
	int pr_poolid;
	int pr_zoneid;
	int pr_contract;
};

/* Data models (pr_dmodel). */
inline char PR_MODEL_ILP32 = 1;
inline char PR_MODEL_LP64 = 2;

/* The kernel's enum pid_type: indices of signal_struct.pids[]. */
inline int PIDTYPE_PID = 0;
inline int PIDTYPE_TGID = 1;
inline int PIDTYPE_PGID = 2;
inline int PIDTYPE_SID = 3;

/* lwpsinfo_t.pr_flag bits and pr_state values (proc(4)). */
inline int PR_STOPPED = 0x00000001;
inline int PR_ISTOP = 0x00000002;
inline int PR_DSTOP = 0x00000004;
inline int PR_IDLE = 0x10000000;
inline char SSLEEP = 1;
inline char SRUN = 2;
inline char SZOMB = 3;
inline char SSTOP = 4;
inline char SIDL = 5;
inline char SONPROC = 6;
inline char SWAIT = 7;

/*
 * A process. The argument words live at the top of the process's stack as the kernel's ELF
 * loader left them: mm->start_stack points at argc, argv follows it and envp follows argv's
 * NULL. They, and pr_psargs (the first argument string), are read from the address space of
 * the thread that fires the probe, so they are right for curpsinfo; a kernel thread (no mm)
 * has pr_psargs = its name and zeroes.
 */
translator psinfo_t < struct task_struct *T > {
	pr_flag = 0;
	pr_nlwp = T->signal->nr_threads;
	pr_pid = T->tgid;
	pr_ppid = T->real_parent->tgid;
	pr_pgid = T->signal->pids[PIDTYPE_PGID]->numbers[0].nr;
	pr_sid = T->signal->pids[PIDTYPE_SID]->numbers[0].nr;
	pr_uid = T->cred->uid.val;
	pr_euid = T->cred->euid.val;
	pr_gid = T->cred->gid.val;
	pr_egid = T->cred->egid.val;
	pr_addr = (uintptr_t)T;
	pr_ttydev = T->signal->tty != NULL ? T->signal->tty : (struct tty_struct *)-1;
	pr_fname = T->comm;
	pr_psargs = T->mm == NULL ? T->comm : copyinstr(T->mm->arg_start);
	pr_wstat = 0;
	pr_argc = T->mm == NULL ? 0 : *(int *)copyin(T->mm->start_stack, sizeof (int));
	pr_argv = T->mm == NULL ? 0 : T->mm->start_stack + 8;
	pr_envp = T->mm == NULL ? 0 :
	    T->mm->start_stack + 8 * (*(int *)copyin(T->mm->start_stack, sizeof (int)) + 2);
	pr_dmodel = PR_MODEL_LP64;
	pr_taskid = 0;
	pr_projid = 0;
	pr_nzomb = 0;
	pr_poolid = 0;
	pr_zoneid = 0;
	pr_contract = 0;
};

/*
 * A thread. __state bits (include/linux/sched.h): 0x1 interruptible and 0x2 uninterruptible
 * sleep, 0x4 stopped, 0x8 traced, 0x10/0x20/0x80 dead or zombie, 0x100/0x200 waking.
 */
translator lwpsinfo_t < struct task_struct *T > {
	pr_flag = (T->__state & 0x4) ? PR_STOPPED : 0;
	pr_lwpid = T->pid;
	pr_addr = (uintptr_t)T;
	pr_wchan = 0;
	pr_stype = 0;
	pr_state = (T->__state & 0x3) ? SSLEEP :
	    (T->__state & 0xc) ? SSTOP :
	    (T->__state & 0xb0) ? SZOMB :
	    (T->__state & 0x300) ? SWAIT : SRUN;
	pr_sname = (T->__state & 0x3) ? 'S' :
	    (T->__state & 0xc) ? 'T' :
	    (T->__state & 0xb0) ? 'Z' :
	    (T->__state & 0x300) ? 'W' : 'R';
	pr_syscall = 0;
	pr_pri = T->prio;
	pr_clname = "TS";
	pr_name = T->comm;
	pr_onpro = T->thread_info.cpu;
	pr_bindpro = -1;
	pr_bindpset = -1;
	pr_lgrp = 0;
};

inline psinfo_t *curpsinfo = xlate < psinfo_t * > (curthread);
inline lwpsinfo_t *curlwpsinfo = xlate < lwpsinfo_t * > (curthread);
