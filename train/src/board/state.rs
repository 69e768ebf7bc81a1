//! The trainer's state as the board holds it: taken from the host trainer, given back to it,
//! and compared field by field.

use crate::fixed::FixedArith;
use crate::{TrainError, Trainer};
use systole_step::arith::Arith;
use systole_step::resident::TrainState;

/// The host trainer's state as the board takes it.
pub(crate) fn state_of(t: &Trainer<FixedArith>) -> TrainState {
    TrainState {
        graph: t.graph.clone(),
        rounding: t.cfg.rounding,
        widths: t.arith.widths(),
        run_seed: t.cfg.seed,
        step: t.step,
        momentum: t.cfg.momentum,
        params: t.params.clone(),
        velocity: t.velocity.clone(),
        fracs: t.arith.state(),
    }
}

/// Takes the board's parameters, formats and step counter into the host trainer (after
/// checking they are this run's); the host's momentum stays as it was.
pub(crate) fn take_params(t: &mut Trainer<FixedArith>, s: TrainState) -> Result<(), TrainError> {
    if s.graph != t.graph || s.run_seed != t.cfg.seed || s.params.len() != t.params.len() {
        return Err(TrainError::Checkpoint(
            "the board's training state is not this run's".into(),
        ));
    }
    t.params = s.params;
    t.arith.set_state(s.fracs);
    t.step = s.step;
    Ok(())
}

/// Takes the board's state into the host trainer (after checking it is this run's).
pub(crate) fn take_state(t: &mut Trainer<FixedArith>, s: TrainState) -> Result<(), TrainError> {
    if s.graph != t.graph || s.run_seed != t.cfg.seed || s.params.len() != t.params.len() {
        return Err(TrainError::Checkpoint(
            "the board's training state is not this run's".into(),
        ));
    }
    t.params = s.params;
    t.velocity = s.velocity;
    t.arith.set_state(s.fracs);
    t.step = s.step;
    Ok(())
}

/// The first difference between the host's state and the board's, named.
pub(crate) fn first_difference(host: &TrainState, board: &TrainState) -> Option<String> {
    if host.step != board.step {
        return Some(format!(
            "step counter: host {}, board {}",
            host.step, board.step
        ));
    }
    let tensors = |s: &TrainState| {
        s.params
            .iter()
            .chain(&s.velocity)
            .cloned()
            .collect::<Vec<_>>()
    };
    let names = systole_step::step::param_names(&host.graph).unwrap_or_default();
    let param_name = |i: usize| {
        names
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("parameter {}", i + 1))
    };
    for (i, (h, b)) in tensors(host).iter().zip(&tensors(board)).enumerate() {
        let n = host.params.len();
        let name = if i < n {
            param_name(i)
        } else {
            format!("{} momentum", param_name(i - n))
        };
        if (h.rows, h.cols, h.frac) != (b.rows, b.cols, b.frac) {
            return Some(format!(
                "{name}: host {}x{} frac {}, board {}x{} frac {}",
                h.rows, h.cols, h.frac, b.rows, b.cols, b.frac
            ));
        }
        if let Some(k) = h.data.iter().zip(&b.data).position(|(x, y)| x != y) {
            return Some(format!(
                "{name} index {k} (row {}, column {}): host {}, board {}",
                k / h.cols,
                k % h.cols,
                h.data[k],
                b.data[k]
            ));
        }
    }
    (host.fracs != board.fracs).then(|| "the remembered formats".to_string())
}
