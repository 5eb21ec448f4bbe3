//! The tracer's own RDTSC trapping (`trap_own_rdtsc`): the counter still reads through `rdtsc()`,
//! and a stray RDTSC in the trapped thread is caught by the safety net instead of killing us.

#[test]
fn trapped_tracer_thread_reads_the_counter_and_survives_a_stray_rdtsc() {
    std::thread::spawn(|| {
        replay_ptrace::trap_own_rdtsc().expect("PR_SET_TSC on our own thread");
        // Through the wrapper: enabled for the one read, no fallback needed.
        let a = replay_ptrace::rdtsc();
        let b = replay_ptrace::rdtsc();
        assert!(b > a, "counter must advance: {a} then {b}");
        assert_eq!(replay_ptrace::own_rdtsc_fallbacks(), 0);
        // A raw RDTSC faults; the SIGSEGV handler re-enables the counter and lets it run again.
        // SAFETY: RDTSC has no memory effects (this is the stray instruction the net must catch).
        let c = unsafe { core::arch::x86_64::_rdtsc() };
        assert!(
            c > b,
            "the re-executed RDTSC returns a later value: {c} vs {b}"
        );
        assert_eq!(replay_ptrace::own_rdtsc_fallbacks(), 1);
        // The counter is now enabled for good: another raw read does not fault again.
        // SAFETY: as above.
        let d = unsafe { core::arch::x86_64::_rdtsc() };
        assert!(d > c);
        assert_eq!(replay_ptrace::own_rdtsc_fallbacks(), 1);
        replay_ptrace::untrap_own_rdtsc();
        // The coarse clock needs no counter and is monotonic.
        let t0 = replay_ptrace::coarse_monotonic_ns();
        assert!(t0 > 0 && replay_ptrace::coarse_monotonic_ns() >= t0);
    })
    .join()
    .expect("thread survived");
}
