//! The worker's own resource use, read from `/proc/self` (Linux), so every report says what the
//! load generator itself cost: the figure that decides how many players one machine simulates.
//! On systems without `/proc` these read as zero.

/// Resident set size of this process, KiB (`VmRSS` in `/proc/self/status`).
pub fn rss_kb() -> u64 {
    status_kb("VmRSS:")
}

/// The highest resident set size this process has had, KiB (`VmHWM`).
pub fn rss_peak_kb() -> u64 {
    status_kb("VmHWM:")
}

fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system) this process has used, in seconds.
///
/// `/proc/self/stat` counts in clock ticks of `USER_HZ`, which the kernel ABI fixes at 100 on
/// every architecture Linux exports it for.
pub fn cpu_s() -> f64 {
    const USER_HZ: f64 = 100.0;
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The command name (field 2) may contain spaces: fields resume after its closing ')'.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (tick(11) + tick(12)) as f64 / USER_HZ
}

/// The soft limit on open files of this process (`/proc/self/limits`), if known.
pub fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_figures_on_linux() {
        if !std::path::Path::new("/proc/self/status").exists() {
            return;
        }
        let before = rss_kb();
        assert!(before > 0);
        // Touch 32 MiB: RSS must grow by most of it.
        let block = vec![1u8; 32 << 20];
        let after = rss_kb();
        assert!(after >= before + 16 * 1024, "{before} -> {after}");
        drop(block);
        let start = cpu_s();
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(300) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(cpu_s() - start >= 0.1);
        assert!(open_files_limit().is_some_and(|n| n > 0));
    }
}
