//! A small feed-forward network over a fixed-size input: standardised inputs, no hidden layer
//! (logistic or softmax regression) or one ReLU layer, and a softmax (one class of several) or
//! sigmoid (independent labels) output. Inference is a few thousand multiply-adds.

use serde::{Deserialize, Serialize};

/// How the last layer's values become probabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Output {
    /// Exactly one of the labels (the probabilities sum to 1).
    Softmax,
    /// Each label on its own (multi-label).
    Sigmoid,
}

/// One dense layer: `outputs` rows of `inputs` weights (row-major) and a bias per output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layer {
    pub inputs: usize,
    pub outputs: usize,
    #[serde(with = "crate::floats")]
    pub weights: Vec<f32>,
    #[serde(with = "crate::floats")]
    pub bias: Vec<f32>,
}

impl Layer {
    /// A layer of zeros.
    pub fn zeros(inputs: usize, outputs: usize) -> Self {
        Self {
            inputs,
            outputs,
            weights: vec![0.0; inputs * outputs],
            bias: vec![0.0; outputs],
        }
    }

    /// `out = W x + b`, summed in index order.
    pub fn forward(&self, x: &[f32], out: &mut [f32]) {
        for (o, value) in out.iter_mut().enumerate().take(self.outputs) {
            let row = &self.weights[o * self.inputs..(o + 1) * self.inputs];
            let mut sum = self.bias[o];
            for (w, v) in row.iter().zip(x) {
                sum += w * v;
            }
            *value = sum;
        }
    }
}

/// A trained head: what it predicts, how its inputs are standardised, and its layers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// One name per output.
    pub labels: Vec<String>,
    pub output: Output,
    /// Per input: subtracted, then multiplied by `scale`.
    #[serde(with = "crate::floats")]
    pub mean: Vec<f32>,
    #[serde(with = "crate::floats")]
    pub scale: Vec<f32>,
    /// One layer (linear) or two (one hidden ReLU layer).
    pub layers: Vec<Layer>,
}

impl Network {
    /// The input width.
    pub fn inputs(&self) -> usize {
        self.mean.len()
    }

    /// Whether the shapes agree with each other (a file read from disk is checked with this).
    pub fn is_consistent(&self) -> bool {
        let mut width = self.inputs();
        if self.scale.len() != width || self.layers.is_empty() || self.layers.len() > 2 {
            return false;
        }
        for layer in &self.layers {
            if layer.inputs != width
                || layer.weights.len() != layer.inputs * layer.outputs
                || layer.bias.len() != layer.outputs
            {
                return false;
            }
            width = layer.outputs;
        }
        width == self.labels.len() && self.labels.len() >= 2 - usize::from(self.output == Output::Sigmoid)
    }

    /// The standardised input.
    pub fn standardise(&self, x: &[f32]) -> Vec<f32> {
        x.iter()
            .zip(&self.mean)
            .zip(&self.scale)
            .map(|((v, m), s)| (v - m) * s)
            .collect()
    }

    /// The last layer's values before the output function. `x` must have [`Self::inputs`]
    /// values (missing ones count as the training mean).
    pub fn logits(&self, x: &[f32]) -> Vec<f32> {
        let mut current = self.standardise(x);
        current.resize(self.inputs(), 0.0);
        for (i, layer) in self.layers.iter().enumerate() {
            let mut next = vec![0.0; layer.outputs];
            layer.forward(&current, &mut next);
            if i + 1 < self.layers.len() {
                for v in &mut next {
                    *v = v.max(0.0);
                }
            }
            current = next;
        }
        current
    }

    /// The probability of each label.
    pub fn predict(&self, x: &[f32]) -> Vec<f32> {
        let mut values = self.logits(x);
        activate(self.output, &mut values);
        values
    }

    /// The probability of one label by name (0 when the head has no such label).
    pub fn probability(&self, probabilities: &[f32], label: &str) -> f32 {
        self.labels
            .iter()
            .position(|l| l == label)
            .and_then(|i| probabilities.get(i).copied())
            .unwrap_or(0.0)
    }
}

/// Turns logits into probabilities in place.
pub fn activate(output: Output, values: &mut [f32]) {
    match output {
        Output::Softmax => {
            let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for v in values.iter_mut() {
                *v = (*v - max).exp();
                sum += *v;
            }
            for v in values.iter_mut() {
                *v /= sum;
            }
        }
        Output::Sigmoid => {
            for v in values.iter_mut() {
                *v = sigmoid(*v);
            }
        }
    }
}

pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_sums_to_one_and_sigmoid_is_per_label() {
        let mut v = vec![1.0, 2.0, 3.0];
        activate(Output::Softmax, &mut v);
        assert!((v.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(v[2] > v[1] && v[1] > v[0]);
        let mut s = vec![0.0, 10.0];
        activate(Output::Sigmoid, &mut s);
        assert!((s[0] - 0.5).abs() < 1e-6 && s[1] > 0.99);
    }

    #[test]
    fn a_hidden_layer_is_rectified() {
        let network = Network {
            labels: vec!["a".into(), "b".into()],
            output: Output::Softmax,
            mean: vec![0.0],
            scale: vec![1.0],
            layers: vec![
                Layer {
                    inputs: 1,
                    outputs: 1,
                    weights: vec![1.0],
                    bias: vec![0.0],
                },
                Layer {
                    inputs: 1,
                    outputs: 2,
                    weights: vec![1.0, -1.0],
                    bias: vec![0.0, 0.0],
                },
            ],
        };
        assert!(network.is_consistent());
        assert_eq!(
            network.logits(&[-3.0]),
            vec![0.0, 0.0],
            "negative hidden values are cut"
        );
        assert_eq!(network.logits(&[2.0]), vec![2.0, -2.0]);
    }
}
