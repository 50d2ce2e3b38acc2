//! The Markdown table the bench prints and saves to `target/bench/latest.md`.

use std::fmt::Write as _;
use std::time::Duration;

/// One printed row.
pub struct Row {
    pub group: String,
    pub what: String,
    pub median: String,
    pub p95: String,
    pub ratio: String,
    pub target: String,
    pub ok: Option<bool>,
}

/// Rows in print order.
pub struct Table {
    rows: Vec<Row>,
    quick: bool,
}

/// (median, p95) of a sample.
pub fn stats(v: &[Duration]) -> (Duration, Duration) {
    let mut s = v.to_vec();
    s.sort();
    if s.is_empty() {
        return (Duration::ZERO, Duration::ZERO);
    }
    let med = s[s.len() / 2];
    let p95 = s[((s.len() as f64 * 0.95) as usize).min(s.len() - 1)];
    (med, p95)
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

impl Table {
    pub fn new(quick: bool) -> Self {
        Self {
            rows: Vec::new(),
            quick,
        }
    }

    /// A timing row; `reference` gives the ratio of medians, `target` the max ratio.
    pub fn timing(
        &mut self,
        group: &str,
        what: &str,
        v: &[Duration],
        reference: Option<&[Duration]>,
        target: Option<f64>,
    ) {
        let (med, p95) = stats(v);
        let (ratio, ok) = match reference {
            Some(r) => {
                let (rm, _) = stats(r);
                let ratio = med.as_secs_f64() / rm.as_secs_f64().max(1e-9);
                (format!("{ratio:.2}×"), target.map(|t| ratio <= t))
            }
            None => ("1.00× (ref)".into(), None),
        };
        self.rows.push(Row {
            group: group.into(),
            what: format!("{what} (n={})", v.len()),
            median: ms(med),
            p95: ms(p95),
            ratio,
            target: target.map(|t| format!("≤ {t:.2}×")).unwrap_or_default(),
            ok,
        });
    }

    /// A free-form row.
    pub fn push(&mut self, row: Row) {
        self.rows.push(row);
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "| group | what | median | p95 | ratio | target | met |");
        let _ = writeln!(s, "|---|---|---|---|---|---|---|");
        for r in &self.rows {
            let met = match r.ok {
                Some(true) => "yes",
                Some(false) => "**MISS**",
                None => "",
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.group, r.what, r.median, r.p95, r.ratio, r.target, met
            );
        }
        s
    }

    pub fn print_and_save(&self) -> anyhow::Result<()> {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0);
        let head = format!(
            "# tabwarden bench{}\n\n{} cores; ratios are medians measured side by side in this run.\n\n",
            if self.quick { " (--quick)" } else { "" },
            cores
        );
        let text = format!("{head}{}", self.render());
        println!("{text}");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join(if self.quick {
                "latest-quick.md"
            } else {
                "latest.md"
            }),
            text,
        )?;
        Ok(())
    }
}
