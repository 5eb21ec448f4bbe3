//! Civil dates in the proleptic Gregorian calendar: days since 1970-01-01 to and from
//! (year, month, day), for every `i64` day count whose year fits (far beyond any timestamp in
//! nanoseconds or seconds that the formats print).
//!
//! The one implementation of date arithmetic in the workspace: printf's `%Y`/`%T` conversions use
//! it, and so do the binary's causal views (`--since`/`--until`, printed times). Source: Howard
//! Hinnant, "chrono-compatible low-level date algorithms" (`civil_from_days`, `days_from_civil`),
//! which work in 400-year eras of 146 097 days, with years starting on 1 March so the leap day is
//! the last day of a year.

/// Days between 0000-03-01, the start of the algorithms' era 0, and 1970-01-01.
const EPOCH_SHIFT: i64 = 719_468;
/// Days in a 400-year era.
const ERA_DAYS: i64 = 146_097;

/// Days since 1970-01-01 (negative before) → `(year, month 1..=12, day 1..=31)`.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + EPOCH_SHIFT;
    let era = z.div_euclid(ERA_DAYS);
    let doe = z.rem_euclid(ERA_DAYS);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `(year, month 1..=12, day 1..=31)` → days since 1970-01-01 (negative before). A day past the
/// month's end counts on into the next month (2023-02-29 is 2023-03-01), as the algorithm does;
/// callers that reject such dates check the day themselves.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * ERA_DAYS + doe - EPOCH_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Boundary dates, each checked both ways; day numbers from `date -u -d DATE +%s` / 86400.
    #[test]
    fn boundary_dates_round_trip() {
        for (days, ymd) in [
            (0, (1970, 1, 1)),
            (-1, (1969, 12, 31)),
            (59, (1970, 3, 1)),
            (789, (1972, 2, 29)),
            (10_956, (1999, 12, 31)),
            (10_957, (2000, 1, 1)),
            (11_016, (2000, 2, 29)),
            (11_017, (2000, 3, 1)),
            (-25_509, (1900, 2, 28)),
            (-25_508, (1900, 3, 1)),
            (-719_528, (0, 1, 1)),
            (-719_469, (0, 2, 29)),
            (-719_529, (-1, 12, 31)),
            (19_782, (2024, 2, 29)),
            (2_932_896, (9999, 12, 31)),
            (2_932_897, (10000, 1, 1)),
        ] {
            assert_eq!(civil_from_days(days), ymd, "civil_from_days({days})");
            assert_eq!(days_from_civil(ymd.0, ymd.1, ymd.2), days, "{ymd:?}");
        }
    }

    /// Every day of 1600..=2400 follows the one before it (no gap or repeat at month, year,
    /// century or leap-day boundaries).
    #[test]
    fn consecutive_days_are_consecutive_dates() {
        let first = days_from_civil(1600, 1, 1);
        let last = days_from_civil(2400, 12, 31);
        let mut prev = civil_from_days(first - 1);
        assert_eq!(prev, (1599, 12, 31));
        for n in first..=last {
            let (y, m, d) = civil_from_days(n);
            let next_of_prev = if prev.2 < len_of(prev.0, prev.1) {
                (prev.0, prev.1, prev.2 + 1)
            } else if prev.1 < 12 {
                (prev.0, prev.1 + 1, 1)
            } else {
                (prev.0 + 1, 1, 1)
            };
            assert_eq!((y, m, d), next_of_prev, "day {n}");
            assert_eq!(days_from_civil(y, m, d), n);
            prev = (y, m, d);
        }
    }

    /// Days in month `m` of year `y` (Gregorian leap years).
    fn len_of(y: i64, m: u32) -> u32 {
        let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
        match m {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    }
}
