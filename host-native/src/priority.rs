//! Thread priorities for background work (applying the queue, checkpointing,
//! writeback).

/// Makes the calling thread yield the CPU and the disk to request handling:
/// acknowledging a request is latency-bound (its fsync is on the critical path),
/// applying the backlog is throughput-bound, and on a small machine the applier's
/// checkpoints and syncs would otherwise hold acknowledgements up for 100+ ms.
///
/// The thread joins the `SCHED_IDLE` class: it runs on CPU time that request
/// threads leave idle, and a request thread that wakes takes its core at once. At
/// nice 19 a waking request thread could still wait for a background thread's slice
/// to end (our reading of the figures below, not traced), at each hop of every
/// request (socket, core, queue fsync, answer). Measured with the suite's burst
/// (2,000 full batches/s on 1M profiles, 15 s): acknowledgement p99 55-112 ms at
/// nice 19 against 22-42 ms here, with the applied rate unchanged (47-51 against
/// 41-64 batches/s).
///
/// A background thread may hold the writer's lock (the applier's commit, the
/// checkpointer's closing pass); requests waiting for that lock sleep, which frees
/// the CPU the holder needs, so it is not starved by them.
pub fn background() {
    #[cfg(target_os = "linux")]
    {
        // On Linux the policy, the nice value and the I/O priority belong to the
        // thread (pid or who = 0: the caller).
        // SAFETY: sched_param is plain integers (musl's has more fields than
        // glibc's); all zero is the priority SCHED_IDLE requires.
        let param: libc::sched_param = unsafe { std::mem::zeroed() };
        // The system call itself: musl's sched_setscheduler() is a stub that fails
        // with ENOSYS (POSIX wants it per process, Linux does it per thread).
        // SAFETY: `param` lives across the call, which only reads it.
        let idle = unsafe { libc::syscall(libc::SYS_sched_setscheduler, 0, libc::SCHED_IDLE, &param as *const _) };
        // Where the idle class is refused (a restricted sandbox), the lowest nice
        // value is the next best. These calls only read their integer arguments.
        // SAFETY: no pointers are passed.
        let nice = if idle == 0 { 0 } else { unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) } };
        // ioprio_set(IOPRIO_WHO_PROCESS, self, IOPRIO_CLASS_IDLE << 13): the I/O
        // scheduler serves the applier's writes when nobody else is waiting.
        const IOPRIO_WHO_PROCESS: libc::c_long = 1;
        const IOPRIO_CLASS_IDLE: libc::c_long = 3;
        // SAFETY: as above.
        let io = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << 13) };
        if nice != 0 || io != 0 {
            tracing::warn!("could not lower a background thread's priority");
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn a_background_thread_runs_in_the_idle_class_and_others_do_not() {
        // SAFETY: sched_getscheduler(0) only reads the calling thread's policy.
        let policy = || unsafe { libc::sched_getscheduler(0) };
        let background = std::thread::spawn(move || {
            super::background();
            policy()
        });
        assert_eq!(background.join().unwrap(), libc::SCHED_IDLE);
        // Only the caller changed: a thread started afterwards is a normal one.
        assert_eq!(std::thread::spawn(policy).join().unwrap(), libc::SCHED_OTHER);
    }
}
