//! `caseload advise`: which upgrade buys the most time per unit of money
//! (the FTK 4 study's own question: "to identify those components which
//! provide the best value").
//!
//! From a recorded run, the devices it was recorded on and a candidates
//! file (upgrades with their prices: a device for one or more channels,
//! or a workstation change such as more RAM, which brings a run recorded
//! with it), every combination a budget allows is predicted with
//! [`crate::predict`] (the relative-fitness model of docs/predict.md),
//! then ranked by total time, time saved, and time saved per unit of
//! price, and the Pareto front (no cheaper configuration is as fast) is
//! marked. Nothing is run: the advice takes as long as the predictions,
//! milliseconds each.
//!
//! Why a run for memory rather than a model of it: `predict` carries a
//! run's device time to other devices, but what more memory changes is
//! what the page cache serves, which only a run with that memory shows
//! (`run --ram`). A workstation option therefore names a run recorded on
//! the same devices with its memory or processors, and device options are
//! predicted from that run when it is chosen.

use crate::predict::{DeviceFigures, Devices, PredictError, Prediction, TOTAL_ERROR, predict};
use caseload_engine::channel::ChannelKind;
use caseload_engine::report::RunReport;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// advise.json's schema identifier.
pub const ADVICE_SCHEMA: &str = "caseload-advice";
/// advise.json's schema version.
pub const ADVICE_SCHEMA_VERSION: u32 = 1;
/// The most options a candidates file may list: every combination is
/// predicted, 2^16 of them at most.
pub const MAX_OPTIONS: usize = 16;

/// Errors reading a candidates file or advising.
#[derive(Debug, thiserror::Error)]
pub enum AdviseError {
    /// Not TOML, or a key that is not known (toml names the line).
    #[error("candidates file `{path}`: {message}")]
    Syntax {
        /// The file.
        path: String,
        /// toml's message, with its line and column.
        message: String,
    },
    /// An option that cannot be used, by line and field.
    #[error("candidates file `{path}`, line {line}, option \"{option}\": {field}: {message}")]
    Option {
        /// The file.
        path: String,
        /// The line of the option's `[[option]]`.
        line: usize,
        /// The option's name.
        option: String,
        /// The field at fault.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The file as a whole.
    #[error("candidates file `{path}`: {message}")]
    File {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The budget is below every option's price.
    #[error(
        "--budget {budget} is below the cheapest option (\"{cheapest}\", {price}): nothing can be bought"
    )]
    Budget {
        /// The budget.
        budget: f64,
        /// The cheapest option.
        cheapest: String,
        /// Its price.
        price: f64,
    },
    /// A prediction failed.
    #[error("predicting {configuration}: {source}")]
    Predict {
        /// The configuration.
        configuration: String,
        /// Why.
        #[source]
        source: PredictError,
    },
}

/// What an option buys.
#[derive(Debug, Clone, PartialEq)]
pub enum Upgrade {
    /// A device for these channels.
    Device {
        /// The channels it takes.
        channels: Vec<ChannelKind>,
        /// Its figures.
        figures: DeviceFigures,
    },
    /// A workstation change (memory, processors), recorded in its own run
    /// on the run's devices.
    Workstation {
        /// What it is, for people (`ram 64 GiB`).
        what: String,
        /// The run recorded with it.
        run: Box<RunReport>,
        /// Where that run came from.
        run_path: PathBuf,
    },
}

/// One candidate upgrade.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Its name.
    pub name: String,
    /// Its price, in the file's currency.
    pub price: f64,
    /// What it buys.
    pub upgrade: Upgrade,
}

/// A candidates file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidates {
    /// The currency prices are in (`price units` when the file says none).
    pub currency: String,
    /// The devices the run was recorded on, when the file names them
    /// (`from`: a lab, lab file or probe JSON).
    pub from: Option<String>,
    /// The options.
    pub options: Vec<Candidate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CandidatesFile {
    currency: Option<String>,
    from: Option<String>,
    #[serde(default, rename = "option")]
    options: Vec<toml::Spanned<OptionFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OptionFile {
    name: Option<String>,
    price: Option<f64>,
    channels: Option<Vec<String>>,
    model: Option<String>,
    probe: Option<PathBuf>,
    figures: Option<FiguresFile>,
    ram: Option<String>,
    cpus: Option<usize>,
    cpu_scale: Option<f64>,
    run: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FiguresFile {
    read_mb_s: f64,
    write_mb_s: f64,
    random_read_iops: f64,
    fsync_ms: Option<f64>,
}

/// A probe's figures for the channels an option names.
pub type ProbeFigures<'a> = &'a dyn Fn(&Path, &[ChannelKind]) -> Result<DeviceFigures, String>;

/// How the file's references are resolved (device models, probe JSON,
/// recorded runs): the command line's loaders, so that the same names
/// mean the same things as in `predict`.
pub struct Resolver<'a> {
    /// A device model by name or file.
    pub model: &'a dyn Fn(&str) -> Result<DeviceFigures, String>,
    /// A probe's figures for a channel (the first channel it measured
    /// when it has none of the option's).
    pub probe: ProbeFigures<'a>,
    /// A recorded run.
    pub run: &'a dyn Fn(&Path) -> Result<RunReport, String>,
}

/// Read a candidates file's `text` (from `path`, which relative paths in
/// it are taken against), checked against the run it advises on: every
/// channel named is one the run used, a workstation option's run
/// processed the same evidence with the same stages.
pub fn parse_candidates(
    text: &str,
    path: &Path,
    base: &RunReport,
    resolve: &Resolver<'_>,
) -> Result<Candidates, AdviseError> {
    let shown = path.display().to_string();
    let file: CandidatesFile = toml::from_str(text).map_err(|e| AdviseError::Syntax {
        path: shown.clone(),
        message: e.to_string().trim().to_string(),
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    if file.options.is_empty() {
        return Err(AdviseError::File {
            path: shown,
            message: "no [[option]]: list the upgrades to weigh, each with its price".into(),
        });
    }
    if file.options.len() > MAX_OPTIONS {
        return Err(AdviseError::File {
            path: shown,
            message: format!(
                "{} options: at most {MAX_OPTIONS} (every combination is predicted)",
                file.options.len()
            ),
        });
    }
    let mut options: Vec<Candidate> = Vec::new();
    for (i, spanned) in file.options.iter().enumerate() {
        let line = line_of(spanned.span().start);
        let o = spanned.get_ref();
        let name = o
            .name
            .clone()
            .unwrap_or_else(|| format!("option {}", i + 1));
        let bad = |field: &'static str, message: String| AdviseError::Option {
            path: shown.clone(),
            line,
            option: name.clone(),
            field,
            message,
        };
        if o.name.as_deref().is_none_or(|n| n.trim().is_empty()) {
            return Err(bad("name", "missing: every option needs a name".into()));
        }
        if options.iter().any(|c| c.name == name) {
            return Err(bad("name", "another option has this name".into()));
        }
        let price = o
            .price
            .ok_or_else(|| bad("price", "missing: what the upgrade costs".into()))?;
        if !(price.is_finite() && price >= 0.0) {
            return Err(bad("price", format!("{price} is not zero or more")));
        }
        let device_keys =
            o.model.is_some() as u8 + o.probe.is_some() as u8 + o.figures.is_some() as u8;
        let workstation =
            o.run.is_some() || o.ram.is_some() || o.cpus.is_some() || o.cpu_scale.is_some();
        let upgrade = if workstation {
            if device_keys > 0 || o.channels.is_some() {
                return Err(bad(
                    "run",
                    "a workstation option (ram, cpus, cpu_scale with its run) names no device or channels: list the device as an option of its own".into(),
                ));
            }
            let run_path = o.run.as_ref().ok_or_else(|| {
                bad(
                    "run",
                    "missing: a workstation option needs a run recorded with it on the same devices (`caseload run --ram ...`)".into(),
                )
            })?;
            let run_path = dir.join(run_path);
            let run = (resolve.run)(&run_path).map_err(|e| bad("run", e))?;
            check_same_work(base, &run).map_err(|e| bad("run", e))?;
            let mut what = Vec::new();
            if let Some(ram) = &o.ram {
                let bytes = caseload_engine::workstation::parse_memory_size(ram)
                    .map_err(|e| bad("ram", e))?;
                let recorded = run.workstation.as_ref().map(|w| w.memory.ram_bytes);
                if recorded != Some(bytes) {
                    return Err(bad(
                        "ram",
                        format!(
                            "{ram} ({bytes} bytes), but `{}` was recorded with {}",
                            run_path.display(),
                            recorded.map_or("no --ram".into(), |b| format!("{b} bytes"))
                        ),
                    ));
                }
                what.push(format!("ram {ram}"));
            }
            if let Some(cpus) = o.cpus {
                let recorded = run.system.cpus_allowed.len();
                if recorded != cpus {
                    return Err(bad(
                        "cpus",
                        format!(
                            "{cpus}, but `{}` ran on {recorded} CPUs",
                            run_path.display()
                        ),
                    ));
                }
                what.push(format!("{cpus} CPUs"));
            }
            if let Some(f) = o.cpu_scale {
                if !(f.is_finite() && f > 0.0) {
                    return Err(bad("cpu_scale", format!("{f} is not a positive number")));
                }
                // `--cpu-scale F` gives the run a quota of F times its CPUs.
                let cpus = run.system.cpus_allowed.len().max(1) as f64;
                let recorded = run.system.cpu_quota.map(|q| q / cpus);
                if !recorded.is_some_and(|r| (r - f).abs() <= 0.01 * f.max(r)) {
                    return Err(bad(
                        "cpu_scale",
                        format!(
                            "{f}, but `{}` ran {}",
                            run_path.display(),
                            recorded.map_or("without a CPU quota (no --cpu-scale)".into(), |r| {
                                format!("with {r:.2} of its CPUs' time (--cpu-scale {r:.2})")
                            })
                        ),
                    ));
                }
                what.push(format!("processor x{f}"));
            }
            if what.is_empty() {
                what.push(format!("the run `{}`", run_path.display()));
            }
            Upgrade::Workstation {
                what: what.join(", "),
                run: Box::new(run),
                run_path,
            }
        } else {
            if device_keys != 1 {
                return Err(bad(
                    "model",
                    "give exactly one of model (a device model), probe (`caseload probe --json` output) or figures (read_mb_s, write_mb_s, random_read_iops, fsync_ms)".into(),
                ));
            }
            let names = o.channels.as_ref().ok_or_else(|| {
                bad(
                    "channels",
                    "missing: the channels the device takes (evidence, database, case, temp)"
                        .into(),
                )
            })?;
            if names.is_empty() {
                return Err(bad("channels", "empty: name at least one channel".into()));
            }
            let mut channels = Vec::new();
            for n in names {
                let kind = ChannelKind::parse(n).ok_or_else(|| {
                    bad(
                        "channels",
                        format!("`{n}` is not a channel (evidence, database, case, temp)"),
                    )
                })?;
                if !base.channels.contains_key(&kind) {
                    return Err(bad(
                        "channels",
                        format!("the run's layout has no {n} channel"),
                    ));
                }
                if channels.contains(&kind) {
                    return Err(bad("channels", format!("`{n}` is named twice")));
                }
                channels.push(kind);
            }
            let figures = if let Some(m) = &o.model {
                (resolve.model)(m).map_err(|e| bad("model", e))?
            } else if let Some(p) = &o.probe {
                (resolve.probe)(&dir.join(p), &channels).map_err(|e| bad("probe", e))?
            } else if let Some(f) = &o.figures {
                let fig = DeviceFigures::from_numbers(
                    format!("figures of option \"{name}\""),
                    f.read_mb_s,
                    f.write_mb_s,
                    f.random_read_iops,
                    f.fsync_ms
                        .map_or(1.0 / f.random_read_iops.max(1e-9), |ms| ms / 1000.0),
                );
                if !fig.is_valid() {
                    return Err(bad(
                        "figures",
                        "every figure must be positive and finite".into(),
                    ));
                }
                fig
            } else {
                return Err(bad("model", "no device given".into()));
            };
            Upgrade::Device { channels, figures }
        };
        options.push(Candidate {
            name,
            price,
            upgrade,
        });
    }
    Ok(Candidates {
        currency: file
            .currency
            .filter(|c| !c.trim().is_empty())
            .unwrap_or_else(|| "price units".into()),
        from: file.from,
        options,
    })
}

/// A workstation option's run must be the same work as the base run: the
/// same evidence and the same stages, in order.
fn check_same_work(base: &RunReport, other: &RunReport) -> Result<(), String> {
    if other.evidence.media_size != base.evidence.media_size
        || other.evidence.format != base.evidence.format
    {
        return Err(format!(
            "it processed other evidence ({} bytes of {:?}, the run {} bytes of {:?})",
            other.evidence.media_size,
            other.evidence.format,
            base.evidence.media_size,
            base.evidence.format
        ));
    }
    let names =
        |r: &RunReport| -> Vec<String> { r.stages.iter().map(|s| s.name.clone()).collect() };
    if names(other) != names(base) {
        return Err(format!(
            "it ran other stages ({}; the run: {})",
            names(other).join(","),
            names(base).join(",")
        ));
    }
    Ok(())
}

/// One configuration: the options bought and what they are predicted to
/// give.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Configuration {
    /// By predicted total time, fastest first (1-based; the base included).
    pub rank: usize,
    /// The options bought (none: the workstation as it is).
    pub options: Vec<String>,
    /// Their total price.
    pub price: f64,
    /// The predicted total, seconds (stage wall times summed).
    pub predicted_total_s: f64,
    /// The range the model's stated error gives.
    pub low_s: f64,
    /// The range's top.
    pub high_s: f64,
    /// Seconds saved against the workstation as it is (predicted).
    pub saved_s: f64,
    /// Saved over the workstation's predicted total.
    pub saved_fraction: f64,
    /// Seconds saved per unit of price; absent for a free configuration.
    pub saved_s_per_price: Option<f64>,
    /// Whether it is on the Pareto front (no configuration at its price
    /// or less is predicted as fast).
    pub pareto: bool,
    /// Whether its saving is smaller than the model's error on the total:
    /// not a confident buy.
    pub within_error: bool,
    /// Per stage: predicted seconds.
    pub stages: Vec<(String, f64)>,
}

/// The advice.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Advice {
    /// [`ADVICE_SCHEMA`].
    pub schema: String,
    /// [`ADVICE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The recorded run advised on.
    pub run: String,
    /// The devices it was recorded on.
    pub from: String,
    /// The candidates file.
    pub candidates: String,
    /// The currency.
    pub currency: String,
    /// The budget, when one was given.
    pub budget: Option<f64>,
    /// How each prediction was made, and its error as measured.
    pub method: String,
    /// The error stated on a predicted total (a share of it).
    pub total_error: f64,
    /// The recorded total of the run, seconds.
    pub recorded_total_s: f64,
    /// The options weighed: name, price, what they buy.
    pub options: Vec<OptionSummary>,
    /// Every configuration the budget allows, fastest first.
    pub configurations: Vec<Configuration>,
    /// The configuration with the most seconds saved per unit of price,
    /// by its rank; absent when nothing priced saves time.
    pub best_value: Option<usize>,
}

/// An option, for the report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OptionSummary {
    /// Name.
    pub name: String,
    /// Price.
    pub price: f64,
    /// What it buys: channels and device figures' source, or the
    /// workstation change and its run.
    pub buys: String,
}

/// Every set of options with no channel bought twice, at most one
/// workstation change, within `budget`: indices into `options`, the empty
/// set first.
fn combinations(options: &[Candidate], budget: Option<f64>) -> Vec<Vec<usize>> {
    fn walk(
        options: &[Candidate],
        budget: Option<f64>,
        i: usize,
        chosen: &mut Vec<usize>,
        price: f64,
        out: &mut Vec<Vec<usize>>,
    ) {
        if i == options.len() {
            out.push(chosen.clone());
            return;
        }
        walk(options, budget, i + 1, chosen, price, out);
        let o = &options[i];
        let total = price + o.price;
        if budget.is_some_and(|b| total > b + 1e-9) {
            return;
        }
        let clashes = chosen
            .iter()
            .any(|&j| match (&options[j].upgrade, &o.upgrade) {
                (Upgrade::Device { channels: a, .. }, Upgrade::Device { channels: b, .. }) => {
                    a.iter().any(|c| b.contains(c))
                }
                (Upgrade::Workstation { .. }, Upgrade::Workstation { .. }) => true,
                _ => false,
            });
        if clashes {
            return;
        }
        chosen.push(i);
        walk(options, budget, i + 1, chosen, total, out);
        chosen.pop();
    }
    let mut out = Vec::new();
    walk(options, budget, 0, &mut Vec::new(), 0.0, &mut out);
    out.sort_by_key(|c| c.len());
    out
}

/// What to advise on.
pub struct Request<'a> {
    /// The recorded run.
    pub run: &'a RunReport,
    /// Where it came from, for the report.
    pub run_path: &'a str,
    /// The devices it was recorded on.
    pub source: &'a Devices,
    /// Their name (a lab, a probe file).
    pub from: &'a str,
    /// The candidates.
    pub candidates: &'a Candidates,
    /// The candidates file, for the report.
    pub candidates_path: &'a str,
    /// The budget.
    pub budget: Option<f64>,
}

/// Predict every configuration the budget allows and rank them.
pub fn advise(req: &Request<'_>) -> Result<Advice, AdviseError> {
    let options = &req.candidates.options;
    if let Some(b) = req.budget
        && let Some(cheapest) = options.iter().min_by(|a, b| a.price.total_cmp(&b.price))
        && b < cheapest.price
    {
        return Err(AdviseError::Budget {
            budget: b,
            cheapest: cheapest.name.clone(),
            price: cheapest.price,
        });
    }
    let mut configurations = Vec::new();
    let mut base_total = None;
    for chosen in combinations(options, req.budget) {
        let mut run = req.run;
        let mut target = req.source.clone();
        for &i in &chosen {
            match &options[i].upgrade {
                Upgrade::Device { channels, figures } => {
                    for c in channels {
                        target.insert(*c, figures.clone());
                    }
                }
                Upgrade::Workstation { run: r, .. } => run = r,
            }
        }
        let names: Vec<String> = chosen.iter().map(|&i| options[i].name.clone()).collect();
        let p: Prediction =
            predict(run, req.source, &target).map_err(|source| AdviseError::Predict {
                configuration: if names.is_empty() {
                    "the workstation as it is".into()
                } else {
                    names.join(" + ")
                },
                source,
            })?;
        let total = p.predicted_total_s;
        // The empty set comes first: the base every saving is against.
        let base = *base_total.get_or_insert(total);
        // 0.0 + ...: a sum of nothing is -0.0, shown as "-0".
        let price: f64 = 0.0 + chosen.iter().map(|&i| options[i].price).sum::<f64>();
        let saved = base - total;
        configurations.push(Configuration {
            rank: 0,
            options: names,
            price,
            predicted_total_s: total,
            low_s: total * (1.0 - p.error_band),
            high_s: total * (1.0 + p.error_band),
            saved_s: saved,
            saved_fraction: if base > 0.0 { saved / base } else { 0.0 },
            saved_s_per_price: (price > 0.0).then(|| saved / price),
            pareto: false,
            // Within error: the saving is less than this configuration's
            // band (its stages' bands as measured on the lab, weighted).
            within_error: saved.abs() < p.error_band * base,
            stages: p
                .stages
                .iter()
                .map(|s| (s.name.clone(), s.predicted_s))
                .collect(),
        });
    }
    mark_pareto(&mut configurations);
    configurations.sort_by(|a, b| {
        a.predicted_total_s
            .total_cmp(&b.predicted_total_s)
            .then(a.price.total_cmp(&b.price))
            .then(a.options.len().cmp(&b.options.len()))
    });
    for (i, c) in configurations.iter_mut().enumerate() {
        c.rank = i + 1;
    }
    let best_value = configurations
        .iter()
        .filter(|c| c.saved_s > 0.0)
        .filter_map(|c| Some((c.rank, c.saved_s_per_price?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(rank, _)| rank);
    Ok(Advice {
        schema: ADVICE_SCHEMA.into(),
        schema_version: ADVICE_SCHEMA_VERSION,
        run: req.run_path.into(),
        from: req.from.into(),
        candidates: req.candidates_path.into(),
        currency: req.candidates.currency.clone(),
        budget: req.budget,
        method: format!(
            "each configuration predicted from the recorded run by caseload predict's relative-fitness model (docs/predict.md): per stage, the producers' lane and the database writer's, each channel's recorded device time carried from the devices it was recorded on to the configuration's (the writer's as its commit chain); a workstation option's own recorded run is the base of the configurations that buy it. Each configuration's band (low-high, and 'within error' where the saving is inside it) is its stages' error bands as measured on caseload's lab (the FTK 4 study's labs, docs/predict.md), weighted by their predicted seconds, at most the largest error of a predicted total measured there, {:.0}%; stages under a second err more",
            TOTAL_ERROR * 100.0
        ),
        total_error: TOTAL_ERROR,
        recorded_total_s: req.run.stages.iter().map(|s| s.wall_seconds).sum(),
        options: options
            .iter()
            .map(|o| OptionSummary {
                name: o.name.clone(),
                price: o.price,
                buys: match &o.upgrade {
                    Upgrade::Device { channels, figures } => format!(
                        "{} on {}",
                        channels
                            .iter()
                            .map(|c| c.name())
                            .collect::<Vec<_>>()
                            .join("+"),
                        figures.source
                    ),
                    Upgrade::Workstation { what, run_path, .. } => {
                        format!("{what} (run {})", run_path.display())
                    }
                },
            })
            .collect(),
        configurations,
        best_value,
    })
}

/// Mark the configurations no other beats: none at the same price or less
/// is predicted faster (ties by price go to the faster, then the smaller
/// set).
fn mark_pareto(configs: &mut [Configuration]) {
    let mut order: Vec<usize> = (0..configs.len()).collect();
    order.sort_by(|&a, &b| {
        configs[a]
            .price
            .total_cmp(&configs[b].price)
            .then(
                configs[a]
                    .predicted_total_s
                    .total_cmp(&configs[b].predicted_total_s),
            )
            .then(configs[a].options.len().cmp(&configs[b].options.len()))
    });
    let mut best = f64::INFINITY;
    for i in order {
        if configs[i].predicted_total_s < best {
            configs[i].pareto = true;
            best = configs[i].predicted_total_s;
        }
    }
}

/// A configuration's options for people.
pub fn label(c: &Configuration) -> String {
    if c.options.is_empty() {
        "(as it is)".into()
    } else {
        c.options.join(" + ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(name: &str, iops: f64) -> DeviceFigures {
        DeviceFigures::from_numbers(name.into(), 100.0, 100.0, iops, 1.0 / iops)
    }

    fn device(name: &str, price: f64, channels: &[ChannelKind]) -> Candidate {
        Candidate {
            name: name.into(),
            price,
            upgrade: Upgrade::Device {
                channels: channels.to_vec(),
                figures: figures(name, 1000.0),
            },
        }
    }

    #[test]
    fn combinations_never_buy_a_channel_twice_and_keep_to_the_budget() {
        use ChannelKind::*;
        let options = vec![
            device("a", 100.0, &[Database]),
            device("b", 300.0, &[Database]),
            device("c", 50.0, &[Evidence, Case]),
            device("d", 80.0, &[Case]),
        ];
        let all = combinations(&options, None);
        // {}, a, b, c, d, ac, ad, bc, bd (c and d share case).
        assert_eq!(all.len(), 9, "{all:?}");
        assert!(all[0].is_empty());
        assert!(!all.iter().any(|c| c.contains(&0) && c.contains(&1)));
        assert!(!all.iter().any(|c| c.contains(&2) && c.contains(&3)));
        let within = combinations(&options, Some(150.0));
        // {}, a, c, d, ac.
        assert_eq!(within.len(), 5, "{within:?}");
        assert!(
            within
                .iter()
                .all(|c| c.iter().map(|&i| options[i].price).sum::<f64>() <= 150.0)
        );
    }

    #[test]
    fn the_front_keeps_only_configurations_nothing_cheaper_beats() {
        let c = |price: f64, t: f64| Configuration {
            rank: 0,
            options: vec![format!("{price}")],
            price,
            predicted_total_s: t,
            low_s: t,
            high_s: t,
            saved_s: 0.0,
            saved_fraction: 0.0,
            saved_s_per_price: None,
            pareto: false,
            within_error: false,
            stages: Vec::new(),
        };
        let mut v = vec![
            c(0.0, 100.0),
            c(100.0, 60.0),
            c(150.0, 70.0),
            c(300.0, 55.0),
            c(400.0, 55.0),
        ];
        mark_pareto(&mut v);
        let front: Vec<f64> = v.iter().filter(|c| c.pareto).map(|c| c.price).collect();
        assert_eq!(front, [0.0, 100.0, 300.0]);
    }
}
