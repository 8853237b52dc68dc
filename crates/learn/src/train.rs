//! Training a [`Network`]: weighted cross-entropy, L2 on the weights (not the biases),
//! mini-batch Adam with a learning rate falling linearly to zero, inputs standardised on the
//! training data. Deterministic: one thread, samples visited in an order drawn from the seed,
//! every sum taken in index order, so the same data and settings give the same bits.

use serde::{Deserialize, Serialize};

use crate::network::{Layer, Network, Output, activate};
use crate::rng::SplitMix;

/// How a head is trained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Units of the hidden layer; 0 for a linear head (logistic or softmax regression).
    pub hidden: usize,
    /// L2 penalty on the weights.
    pub l2: f32,
    pub epochs: usize,
    pub batch: usize,
    pub learning_rate: f32,
    pub seed: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            hidden: 0,
            l2: 1e-3,
            epochs: 40,
            batch: 32,
            learning_rate: 0.01,
            seed: 22,
        }
    }
}

/// What each sample should predict.
#[derive(Debug, Clone, Copy)]
pub enum Targets<'a> {
    /// One class index per sample (softmax).
    Classes(&'a [usize]),
    /// A yes/no per label per sample (sigmoid).
    Labels(&'a [Vec<bool>]),
}

impl Targets<'_> {
    fn output(&self) -> Output {
        match self {
            Targets::Classes(_) => Output::Softmax,
            Targets::Labels(_) => Output::Sigmoid,
        }
    }

    fn len(&self) -> usize {
        match self {
            Targets::Classes(c) => c.len(),
            Targets::Labels(l) => l.len(),
        }
    }

    /// `delta[o] = p[o] - target[o]`.
    fn delta(&self, sample: usize, probabilities: &[f32], delta: &mut [f32]) {
        match self {
            Targets::Classes(classes) => {
                for (o, d) in delta.iter_mut().enumerate() {
                    *d = probabilities[o] - if classes[sample] == o { 1.0 } else { 0.0 };
                }
            }
            Targets::Labels(labels) => {
                for (o, d) in delta.iter_mut().enumerate() {
                    let target = labels[sample].get(o).copied().unwrap_or(false);
                    *d = probabilities[o] - if target { 1.0 } else { 0.0 };
                }
            }
        }
    }
}

/// Per input, the mean and the inverse of the standard deviation over the samples.
pub fn standardisation(inputs: &[Vec<f32>]) -> (Vec<f32>, Vec<f32>) {
    let width = inputs.first().map_or(0, Vec::len);
    let n = inputs.len().max(1) as f64;
    let mut mean = vec![0f64; width];
    for x in inputs {
        for (m, v) in mean.iter_mut().zip(x) {
            *m += f64::from(*v);
        }
    }
    for m in &mut mean {
        *m /= n;
    }
    let mut variance = vec![0f64; width];
    for x in inputs {
        for ((s, v), m) in variance.iter_mut().zip(x).zip(&mean) {
            *s += (f64::from(*v) - m).powi(2);
        }
    }
    let scale = variance
        .iter()
        .map(|s| {
            let sd = (s / n).sqrt();
            if sd > 1e-6 { (1.0 / sd) as f32 } else { 0.0 }
        })
        .collect();
    (mean.into_iter().map(|m| m as f32).collect(), scale)
}

/// Adam's moments for one layer.
struct Moments {
    weights: (Vec<f32>, Vec<f32>),
    bias: (Vec<f32>, Vec<f32>),
}

impl Moments {
    fn of(layer: &Layer) -> Self {
        Self {
            weights: (vec![0.0; layer.weights.len()], vec![0.0; layer.weights.len()]),
            bias: (vec![0.0; layer.bias.len()], vec![0.0; layer.bias.len()]),
        }
    }
}

const BETA1: f32 = 0.9;
const BETA2: f32 = 0.999;
const EPSILON: f32 = 1e-8;

/// One Adam step of `values` along `gradient`, with its first and second moments.
pub(crate) fn adam(values: &mut [f32], gradient: &[f32], first: &mut [f32], second: &mut [f32], rate: f32, step: i32) {
    let correction1 = 1.0 - BETA1.powi(step);
    let correction2 = 1.0 - BETA2.powi(step);
    for (((v, g), m), s) in values
        .iter_mut()
        .zip(gradient)
        .zip(first.iter_mut())
        .zip(second.iter_mut())
    {
        *m = BETA1 * *m + (1.0 - BETA1) * g;
        *s = BETA2 * *s + (1.0 - BETA2) * g * g;
        *v -= rate * (*m / correction1) / ((*s / correction2).sqrt() + EPSILON);
    }
}

/// A layer with weights drawn uniformly within Glorot's bound, biases zero.
fn initial(inputs: usize, outputs: usize, rng: &mut SplitMix) -> Layer {
    let bound = (6.0 / (inputs + outputs) as f32).sqrt();
    let mut layer = Layer::zeros(inputs, outputs);
    for w in &mut layer.weights {
        *w = (rng.unit() * 2.0 - 1.0) * bound;
    }
    layer
}

/// Trains a head on `inputs` (one row per sample, all the same width) with a weight per
/// sample. Panics when the shapes disagree: the callers build them.
pub fn train(
    inputs: &[Vec<f32>],
    targets: Targets<'_>,
    sample_weights: &[f32],
    labels: Vec<String>,
    settings: &Settings,
) -> Network {
    let n = inputs.len();
    assert!(n > 0, "no training samples");
    assert_eq!(targets.len(), n, "one target per sample");
    assert_eq!(sample_weights.len(), n, "one weight per sample");
    let width = inputs[0].len();
    assert!(inputs.iter().all(|x| x.len() == width), "inputs of one width");
    let outputs = labels.len();
    let output = targets.output();
    let (mean, scale) = standardisation(inputs);
    let xs: Vec<f32> = inputs
        .iter()
        .flat_map(|x| x.iter().zip(&mean).zip(&scale).map(|((v, m), s)| (v - m) * s))
        .collect();

    let mut rng = SplitMix::new(settings.seed);
    let mut layers = if settings.hidden == 0 {
        vec![Layer::zeros(width, outputs)]
    } else {
        vec![
            initial(width, settings.hidden, &mut rng),
            initial(settings.hidden, outputs, &mut rng),
        ]
    };
    let mut moments: Vec<Moments> = layers.iter().map(Moments::of).collect();
    let mut gradients: Vec<Layer> = layers.iter().map(|l| Layer::zeros(l.inputs, l.outputs)).collect();

    let batch = settings.batch.max(1);
    let steps_per_epoch = n.div_ceil(batch);
    let total_steps = (settings.epochs * steps_per_epoch).max(1);
    let mut order: Vec<usize> = (0..n).collect();
    let mut step = 0usize;
    let hidden = settings.hidden;
    let mut h = vec![0f32; hidden];
    let mut dh = vec![0f32; hidden];
    let mut z = vec![0f32; outputs];
    let mut delta = vec![0f32; outputs];
    for _ in 0..settings.epochs {
        rng.shuffle(&mut order);
        for chunk in order.chunks(batch) {
            let total: f32 = chunk.iter().map(|&i| sample_weights[i]).sum();
            step += 1;
            if total <= 0.0 {
                continue;
            }
            for g in &mut gradients {
                g.weights.iter_mut().for_each(|v| *v = 0.0);
                g.bias.iter_mut().for_each(|v| *v = 0.0);
            }
            for &i in chunk {
                let share = sample_weights[i] / total;
                if share == 0.0 {
                    continue;
                }
                let x = &xs[i * width..(i + 1) * width];
                let last_input: &[f32] = if hidden > 0 {
                    layers[0].forward(x, &mut h);
                    h.iter_mut().for_each(|v| *v = v.max(0.0));
                    &h
                } else {
                    x
                };
                let last = layers.len() - 1;
                layers[last].forward(last_input, &mut z);
                activate(output, &mut z);
                targets.delta(i, &z, &mut delta);
                let g = &mut gradients[last];
                for (o, d) in delta.iter().enumerate() {
                    let d = d * share;
                    g.bias[o] += d;
                    let row = &mut g.weights[o * g.inputs..(o + 1) * g.inputs];
                    for (w, v) in row.iter_mut().zip(last_input) {
                        *w += d * v;
                    }
                }
                if hidden > 0 {
                    for (j, value) in dh.iter_mut().enumerate() {
                        *value = if h[j] > 0.0 {
                            let mut sum = 0.0;
                            for (o, d) in delta.iter().enumerate() {
                                sum += layers[1].weights[o * hidden + j] * d;
                            }
                            sum * share
                        } else {
                            0.0
                        };
                    }
                    let g = &mut gradients[0];
                    for (j, d) in dh.iter().enumerate() {
                        if *d == 0.0 {
                            continue;
                        }
                        g.bias[j] += d;
                        let row = &mut g.weights[j * width..(j + 1) * width];
                        for (w, v) in row.iter_mut().zip(x) {
                            *w += d * v;
                        }
                    }
                }
            }
            let rate = settings.learning_rate * (1.0 - (step - 1) as f32 / total_steps as f32);
            let t = step.min(i32::MAX as usize) as i32;
            for ((layer, g), m) in layers.iter_mut().zip(&mut gradients).zip(&mut moments) {
                for (gw, w) in g.weights.iter_mut().zip(&layer.weights) {
                    *gw += settings.l2 * w;
                }
                adam(
                    &mut layer.weights,
                    &g.weights,
                    &mut m.weights.0,
                    &mut m.weights.1,
                    rate,
                    t,
                );
                adam(&mut layer.bias, &g.bias, &mut m.bias.0, &mut m.bias.1, rate, t);
            }
        }
    }
    Network {
        labels,
        output,
        mean,
        scale,
        layers,
    }
}

/// Weights that give each class the same total (a class of n samples weighs 1/n each, scaled
/// so the weights average 1).
pub fn balanced(classes: &[usize], count: usize) -> Vec<f32> {
    let mut per_class = vec![0usize; count];
    for &c in classes {
        per_class[c] += 1;
    }
    let present = per_class.iter().filter(|&&n| n > 0).count().max(1);
    classes
        .iter()
        .map(|&c| classes.len() as f32 / (present as f32 * per_class[c] as f32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two clusters per class in 4 dimensions, one class needing a non-linear boundary.
    fn toy() -> (Vec<Vec<f32>>, Vec<usize>) {
        let mut rng = SplitMix::new(7);
        let mut inputs = Vec::new();
        let mut classes = Vec::new();
        for i in 0..240 {
            let class = i % 3;
            let centre = match class {
                0 => [1.0, 0.0, 0.0, 0.0],
                1 => [0.0, 1.0, 0.0, 0.0],
                _ => [0.0, 0.0, 1.0, 0.5],
            };
            inputs.push(centre.iter().map(|c| c + (rng.unit() - 0.5) * 0.6).collect());
            classes.push(class);
        }
        (inputs, classes)
    }

    fn accuracy(network: &Network, inputs: &[Vec<f32>], classes: &[usize]) -> f32 {
        let right = inputs
            .iter()
            .zip(classes)
            .filter(|(x, c)| {
                let p = network.predict(x);
                let best = (0..p.len()).max_by(|a, b| p[*a].total_cmp(&p[*b])).unwrap();
                best == **c
            })
            .count();
        right as f32 / classes.len() as f32
    }

    #[test]
    fn training_is_deterministic_and_learns() {
        let (inputs, classes) = toy();
        let weights = vec![1.0; inputs.len()];
        let labels: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        for hidden in [0, 8] {
            let settings = Settings {
                hidden,
                epochs: 30,
                ..Default::default()
            };
            let first = train(&inputs, Targets::Classes(&classes), &weights, labels.clone(), &settings);
            let second = train(&inputs, Targets::Classes(&classes), &weights, labels.clone(), &settings);
            assert_eq!(first, second, "hidden {hidden}: the same bits twice");
            assert!(first.is_consistent());
            assert!(accuracy(&first, &inputs, &classes) > 0.95, "hidden {hidden}");
            let other = train(
                &inputs,
                Targets::Classes(&classes),
                &weights,
                labels.clone(),
                &Settings { seed: 23, ..settings },
            );
            if hidden > 0 {
                assert_ne!(first, other, "the seed matters");
            }
        }
    }

    #[test]
    fn multi_label_heads_learn_each_label() {
        let (inputs, classes) = toy();
        let targets: Vec<Vec<bool>> = classes.iter().map(|&c| vec![c == 0, c != 1]).collect();
        let network = train(
            &inputs,
            Targets::Labels(&targets),
            &vec![1.0; inputs.len()],
            vec!["zero".into(), "not_one".into()],
            &Settings::default(),
        );
        let p = network.predict(&[1.0, 0.0, 0.0, 0.0]);
        assert!(p[0] > 0.8 && p[1] > 0.8, "{p:?}");
        let p = network.predict(&[0.0, 1.0, 0.0, 0.0]);
        assert!(p[0] < 0.2 && p[1] < 0.2, "{p:?}");
    }

    #[test]
    fn balanced_weights_give_each_class_the_same_total() {
        let w = balanced(&[0, 0, 0, 1], 2);
        assert!((w[0] * 3.0 - w[3]).abs() < 1e-6);
        assert!((w.iter().sum::<f32>() - 4.0).abs() < 1e-5);
    }
}
