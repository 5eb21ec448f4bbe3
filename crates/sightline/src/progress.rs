//! The progress bar of `sightline probe` while many probes attach (a million instruction probes
//! take seconds): drawn on stderr only when stderr is a terminal, and erased when attaching is
//! done, so it never lands in a log or a pipe.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Attach steps (probe sites of merged uprobe programs, other probe programs) from which the bar
/// is drawn: fewer attach in a blink.
pub const MIN_STEPS: usize = 1000;

/// The attach-progress observer: [`AttachBar::update`] is the consumer's attach callback.
#[derive(Debug)]
pub struct AttachBar {
    target: Option<ProgressDrawTarget>,
    bar: Option<ProgressBar>,
}

impl AttachBar {
    /// A bar drawn on stderr when it is a terminal (nothing otherwise).
    pub fn stderr() -> AttachBar {
        use std::io::IsTerminal;
        AttachBar::to(
            std::io::stderr()
                .is_terminal()
                .then(ProgressDrawTarget::stderr),
        )
    }

    /// A bar drawn on `target` (`None`: never drawn).
    pub fn to(target: Option<ProgressDrawTarget>) -> AttachBar {
        AttachBar { target, bar: None }
    }

    /// `done` of `total` attach steps are done: starts the bar (when `total` reaches
    /// [`MIN_STEPS`]), moves it, and erases it at the end.
    pub fn update(&mut self, done: usize, total: usize) {
        if self.bar.is_none()
            && total >= MIN_STEPS
            && done < total
            && let Some(t) = self.target.take()
        {
            let bar = ProgressBar::with_draw_target(Some(total as u64), t);
            bar.set_style(
                ProgressStyle::with_template(
                    "sightline: attaching probes [{bar:30}] {pos}/{len} sites, {elapsed}",
                )
                .expect("a valid template")
                .progress_chars("=> "),
            );
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(done as u64);
            if done >= total {
                bar.finish_and_clear();
                self.bar = None;
            }
        }
    }

    /// The bar's position and length while it is shown.
    #[cfg(test)]
    pub fn shown(&self) -> Option<(u64, u64)> {
        self.bar
            .as_ref()
            .map(|b| (b.position(), b.length().unwrap_or(0)))
    }
}

impl Drop for AttachBar {
    fn drop(&mut self) {
        // An attach error leaves the bar mid-way: erase it before the error is printed.
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_follows_many_steps_and_goes_at_the_end() {
        let mut b = AttachBar::to(Some(ProgressDrawTarget::hidden()));
        b.update(0, 70_000);
        assert_eq!(b.shown(), Some((0, 70_000)));
        b.update(65_536, 70_000);
        assert_eq!(b.shown(), Some((65_536, 70_000)));
        b.update(70_000, 70_000);
        assert_eq!(b.shown(), None);
    }

    #[test]
    fn few_steps_or_no_terminal_draw_nothing() {
        let mut few = AttachBar::to(Some(ProgressDrawTarget::hidden()));
        few.update(0, MIN_STEPS - 1);
        assert_eq!(few.shown(), None);
        let mut none = AttachBar::to(None);
        none.update(0, 1_000_000);
        assert_eq!(none.shown(), None);
    }
}
