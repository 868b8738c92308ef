//! Section 4 of docs/BENCHMARKS.md, "Cost model (per month)": the model of tests/support/cost.rs
//! fed with the wall time per delete of the inside CPU run (`cpu`) and the units counted per
//! expired item (units.rs), which it renders first.

use std::fmt::Write as _;

use crate::cpu::Cpu;
use crate::support::cost;

// Prices used by the cost model (us-east-1, on-demand), as published by AWS; check current pricing.
pub fn render(d: &mut String, cpu: &Cpu, counted: &crate::units::Figures) {
    let _ = writeln!(d, "## 4. Cost model (per month)\n");
    crate::units::render(d, counted);
    let inputs = cost::Inputs::from_code(cpu.wall_secs / cpu.deleted.max(1) as f64);
    let c = crate::units::median_counted(counted);
    let _ = writeln!(d, "<!-- cost-model: tests/support/cost.rs, checked by tests/readme.rs -->\n{}<!-- /cost-model -->\n", cost::benchmarks_section(&inputs, &c));
}
