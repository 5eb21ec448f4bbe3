//! Energy: a sensor (RAPL through powercap) or a linear model, and the apportionment of each
//! interval's energy to what ran in it.
//!
//! RAPL (Intel's running average power limit counters, exposed by the kernel's powercap
//! framework, `Documentation/power/powercap/powercap.rst`): each package zone
//! `/sys/class/powercap/intel-rapl:N` has `energy_uj` (a counter in µJ that wraps at
//! `max_energy_range_uj`). Per interval the packages' deltas are summed and split by CPU share,
//! as Quanto splits a node's metered energy among the activities that ran (Dutta et al.,
//! "Quanto", OSDI 2008): a key's share is its on-CPU ns over the machine's busy CPU ns in that
//! interval (from `/proc/stat`); what no accounted thread used stays unattributed.
//!
//! Without RAPL the [`Model`] gives energy = CPU ns × watts per core + bytes × joules per byte,
//! with coefficients from a calibration file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::AccountError;

/// The RAPL package zones under a powercap root.
#[derive(Debug, Clone)]
pub struct Powercap {
    zones: Vec<Zone>,
}

#[derive(Debug, Clone)]
struct Zone {
    energy: PathBuf,
    max_range_uj: u64,
}

impl Powercap {
    /// The package zones (`intel-rapl:N`, not their subzones `intel-rapl:N:M`) under `root`
    /// (normally `/sys/class/powercap`); `None` when there is none (no RAPL on this machine).
    ///
    /// # Errors
    /// [`AccountError::Energy`] when a zone's `max_energy_range_uj` cannot be read or parsed.
    pub fn open(root: &Path) -> Result<Option<Powercap>, AccountError> {
        let Ok(dir) = std::fs::read_dir(root) else {
            return Ok(None);
        };
        let mut names: Vec<String> = dir
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| {
                n.strip_prefix("intel-rapl:")
                    .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
            })
            .collect();
        names.sort();
        let mut zones = Vec::new();
        for n in names {
            let z = root.join(&n);
            let max_range_uj = read_u64(&z.join("max_energy_range_uj"))?;
            zones.push(Zone {
                energy: z.join("energy_uj"),
                max_range_uj,
            });
        }
        Ok((!zones.is_empty()).then_some(Powercap { zones }))
    }

    /// One reading of every zone's counter (µJ), in zone order.
    ///
    /// # Errors
    /// [`AccountError::Energy`] when a counter cannot be read.
    pub fn sample(&self) -> Result<Vec<u64>, AccountError> {
        self.zones.iter().map(|z| read_u64(&z.energy)).collect()
    }

    /// Energy between two samples in µJ, summed over zones; a counter that went down wrapped
    /// once at its `max_energy_range_uj`.
    pub fn delta_uj(&self, before: &[u64], after: &[u64]) -> u64 {
        self.zones
            .iter()
            .zip(before.iter().zip(after))
            .map(|(z, (&b, &a))| {
                if a >= b {
                    a - b
                } else {
                    z.max_range_uj.saturating_sub(b).saturating_add(a)
                }
            })
            .sum()
    }
}

fn read_u64(p: &Path) -> Result<u64, AccountError> {
    let t = std::fs::read_to_string(p).map_err(|e| AccountError::Energy {
        what: format!("reading {}: {e}", p.display()),
    })?;
    t.trim().parse().map_err(|_| AccountError::Energy {
        what: format!(
            "{}: expected a number of µJ, found {:?}",
            p.display(),
            t.trim()
        ),
    })
}

/// Busy CPU ns of the whole machine so far: the `cpu` line of `/proc/stat` (user, nice, system,
/// irq, softirq, steal; in USER_HZ ticks) times 10^9 / USER_HZ.
///
/// # Errors
/// [`AccountError::Energy`] when the file cannot be read or has no `cpu` line.
pub fn busy_ns(proc_stat: &Path) -> Result<u64, AccountError> {
    // user nice system idle iowait irq softirq steal
    cpu_line_ns(proc_stat, &[0, 1, 2, 5, 6, 7])
}

/// Steal time of the whole machine so far, ns: the 8th value of `/proc/stat`'s `cpu` line (time
/// the hypervisor ran something else on a vCPU; 0 on bare metal).
///
/// # Errors
/// As [`busy_ns`].
pub fn steal_ns(proc_stat: &Path) -> Result<u64, AccountError> {
    cpu_line_ns(proc_stat, &[7])
}

/// The sum of the values at `fields` (0-based after the `cpu` label) of `/proc/stat`'s `cpu`
/// line, ns.
fn cpu_line_ns(proc_stat: &Path, fields: &[usize]) -> Result<u64, AccountError> {
    let t = std::fs::read_to_string(proc_stat).map_err(|e| AccountError::Energy {
        what: format!("reading {}: {e}", proc_stat.display()),
    })?;
    let line = t
        .lines()
        .find(|l| l.starts_with("cpu "))
        .ok_or_else(|| AccountError::Energy {
            what: format!("{}: no `cpu` line", proc_stat.display()),
        })?;
    let f: Vec<u64> = line
        .split_ascii_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let ticks: u64 = fields.iter().filter_map(|&i| f.get(i)).sum();
    Ok(ticks.saturating_mul(1_000_000_000 / USER_HZ))
}

/// The tick of `/proc/stat` (USER_HZ, 100 on every Linux architecture: proc(5)).
const USER_HZ: u64 = 100;

/// Splits `energy_uj` of one interval among `cpu_ns` by CPU share: key k gets
/// `energy_uj × cpu_ns[k] / max(busy_ns, Σ cpu_ns)`. Returns the per-key µJ and the unattributed
/// rest (the energy of CPU time no key used, idle included).
pub fn apportion<K: Ord + Clone>(
    energy_uj: f64,
    busy_ns: u64,
    cpu_ns: &BTreeMap<K, u64>,
) -> (BTreeMap<K, f64>, f64) {
    let total: u64 = cpu_ns.values().sum();
    let denom = busy_ns.max(total);
    if denom == 0 {
        return (BTreeMap::new(), energy_uj);
    }
    let out: BTreeMap<K, f64> = cpu_ns
        .iter()
        .map(|(k, &c)| (k.clone(), energy_uj * c as f64 / denom as f64))
        .collect();
    let given: f64 = out.values().sum();
    (out, energy_uj - given)
}

/// The linear model used without RAPL.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    /// Watts drawn by one fully busy core (J per CPU-second).
    pub watts_per_core: f64,
    /// Joules per byte of block I/O.
    pub joules_per_disk_byte: f64,
    /// Joules per byte sent or received.
    pub joules_per_net_byte: f64,
}

impl Default for Model {
    /// 10 W per busy core, 5 nJ per disk byte, 20 nJ per network byte: orders of magnitude of a
    /// server core and of SSD and NIC energy per byte; calibrate for real figures.
    fn default() -> Model {
        Model {
            watts_per_core: 10.0,
            joules_per_disk_byte: 5e-9,
            joules_per_net_byte: 20e-9,
        }
    }
}

impl Model {
    /// Parses a calibration file: `key = value` lines (`watts_per_core`, `joules_per_disk_byte`,
    /// `joules_per_net_byte`), `#` comments; missing keys keep the defaults.
    ///
    /// # Errors
    /// [`AccountError::Energy`] naming the line for an unknown key or a value that is not a
    /// finite non-negative number.
    pub fn parse(text: &str) -> Result<Model, AccountError> {
        let mut m = Model::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |why: &str| AccountError::Energy {
                what: format!("calibration line {}: {why}: {raw:?}", i + 1),
            };
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| bad("expected key = value"))?;
            let v: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| bad("expected a non-negative number"))?;
            match k.trim() {
                "watts_per_core" => m.watts_per_core = v,
                "joules_per_disk_byte" => m.joules_per_disk_byte = v,
                "joules_per_net_byte" => m.joules_per_net_byte = v,
                _ => return Err(bad("unknown key")),
            }
        }
        Ok(m)
    }

    /// µJ of `cpu_ns` of CPU, `disk` bytes of block I/O and `net` bytes of network traffic.
    pub fn energy_uj(&self, cpu_ns: u64, disk: u64, net: u64) -> f64 {
        (cpu_ns as f64 * 1e-9 * self.watts_per_core
            + disk as f64 * self.joules_per_disk_byte
            + net as f64 * self.joules_per_net_byte)
            * 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_file() {
        let m = Model::parse("# calibrated\nwatts_per_core = 12.5\njoules_per_net_byte=1e-8\n")
            .unwrap();
        assert_eq!(m.watts_per_core, 12.5);
        assert_eq!(m.joules_per_net_byte, 1e-8);
        assert_eq!(
            m.joules_per_disk_byte,
            Model::default().joules_per_disk_byte
        );
        // 2 CPU-seconds at 12.5 W = 25 J; 1e6 net bytes at 10 nJ = 0.01 J.
        assert!((m.energy_uj(2_000_000_000, 0, 1_000_000) - 25.01e6).abs() < 1e-3);
        let e = Model::parse("watts = 3").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("unknown key"), "{e}");
        assert!(Model::parse("watts_per_core = -1").is_err());
    }

    #[test]
    fn apportion_by_cpu_share() {
        let cpu = BTreeMap::from([("a", 30u64), ("b", 10)]);
        let (e, rest) = apportion(1000.0, 80, &cpu);
        assert_eq!(e["a"], 375.0);
        assert_eq!(e["b"], 125.0);
        assert_eq!(rest, 500.0);
        // Busy below the accounted sum (sampling skew): shares are of the sum, nothing left.
        let (e, rest) = apportion(1000.0, 20, &cpu);
        assert_eq!((e["a"], e["b"], rest), (750.0, 250.0, 0.0));
    }

    #[test]
    fn proc_stat_busy() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("stat");
        std::fs::write(&p, "cpu  10 2 3 1000 50 4 5 6 0 0\ncpu0 1 1 1 1\n").unwrap();
        // user+nice+system+irq+softirq+steal = 30 ticks = 300 ms.
        assert_eq!(busy_ns(&p).unwrap(), 300_000_000);
    }
}
