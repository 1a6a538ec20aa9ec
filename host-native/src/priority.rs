//! Thread priorities for background work (applying the queue, checkpointing).

/// Makes the calling thread yield the CPU and the disk to request handling:
/// acknowledging a request is latency-bound (its fsync is on the critical path),
/// applying the backlog is throughput-bound, and on a small machine the applier's
/// checkpoints and syncs would otherwise hold acknowledgements up for 100+ ms.
pub fn background() {
    #[cfg(target_os = "linux")]
    {
        // On Linux a nice value and an I/O priority belong to the thread (who = 0:
        // the caller). Both calls only read their integer arguments.
        // SAFETY: no pointers are passed.
        let nice = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
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
