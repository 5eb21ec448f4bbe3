syscall::opnat:entry
{
	trace(1);
}

syscall::read:entyr { }

BEGN { }

sched:::sched_swich { }

nosuch:::thing { }
