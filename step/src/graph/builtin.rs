//! The networks systole ships, built as graphs: the MLP and the small CNN (the same layers,
//! operation names and so the same bits as they always had), LeNet-5 and ResNet-8.

use super::{Graph, GraphError, Shape, Src};
use crate::layers::{Add, AvgPool, Conv2d, Dense, GlobalAvgPool, Layer, MaxPool, Relu};
use alloc::format;

fn dense(out: usize) -> Layer {
    Layer::Dense(Dense { out, bias: true })
}

fn conv(out_ch: usize, kernel: usize, stride: usize, pad: usize) -> Layer {
    Layer::Conv2d(Conv2d {
        out_ch,
        kernel,
        stride,
        pad,
        bias: true,
    })
}

fn relu() -> Layer {
    Layer::Relu(Relu)
}

/// Dense layers with ReLU between them: the input, the `hidden` widths, then the classes.
pub fn mlp(input: Shape, hidden: &[usize], classes: usize) -> Result<Graph, GraphError> {
    let mut g = Graph::new(input, classes);
    for &h in hidden {
        g.then(dense(h))?;
        g.then(relu())?;
    }
    g.then(dense(classes))?;
    g.check()?;
    Ok(g)
}

/// Blocks of 3x3 convolution (padding 1), ReLU and 2x2 max pooling, one per entry of
/// `channels`, then a dense layer.
pub fn cnn(input: Shape, channels: &[usize], classes: usize) -> Result<Graph, GraphError> {
    let mut g = Graph::new(input, classes);
    let (mut h, mut w) = (input.h, input.w);
    for &c in channels {
        if c == 0 || h < 2 || w < 2 || h % 2 != 0 || w % 2 != 0 {
            return Err(GraphError::whole(format!(
                "a convolution block needs positive channels and an even image size to pool; got {c} channels on {h}x{w} (use fewer --channels)"
            )));
        }
        g.then(conv(c, 3, 1, 1))?;
        g.then(relu())?;
        g.then(Layer::MaxPool(MaxPool {
            kernel: 2,
            stride: 2,
        }))?;
        (h, w) = (h / 2, w / 2);
    }
    g.then(dense(classes))?;
    g.check()?;
    Ok(g)
}

/// LeNet-5 with ReLU and max pooling: 6 filters of 5x5 (padding 2, so a 28x28 input keeps
/// its size), pool, 16 filters of 5x5, pool, then dense 120, 84 and the classes.
pub fn lenet5(input: Shape, classes: usize) -> Result<Graph, GraphError> {
    let mut g = Graph::new(input, classes);
    let pool = || {
        Layer::MaxPool(MaxPool {
            kernel: 2,
            stride: 2,
        })
    };
    for l in [
        conv(6, 5, 1, 2),
        relu(),
        pool(),
        conv(16, 5, 1, 0),
        relu(),
        pool(),
    ] {
        g.then(l)?;
    }
    for l in [dense(120), relu(), dense(84), relu(), dense(classes)] {
        g.then(l)?;
    }
    g.check()?;
    Ok(g)
}

/// ResNet-8: a 3x3 stem of 16 filters, three stages of one residual block each (16, 32 and
/// 64 filters; the second and third halve the map with stride 2 and take a 1x1 stride-2
/// convolution on the shortcut), global average pooling and a dense layer. About 78k
/// parameters on one channel.
pub fn resnet8(input: Shape, classes: usize) -> Result<Graph, GraphError> {
    let mut g = Graph::new(input, classes);
    let mut x = Src::Node(g.push("stem", conv(16, 3, 1, 1), &[Src::Input])?);
    x = Src::Node(g.push("stem_relu", relu(), &[x])?);
    for (s, ch) in [(1usize, 16usize), (2, 32), (3, 64)] {
        let stride = if s == 1 { 1 } else { 2 };
        let a = g.push(&format!("s{s}_conv1"), conv(ch, 3, stride, 1), &[x])?;
        let a = g.push(&format!("s{s}_relu1"), relu(), &[Src::Node(a)])?;
        let b = g.push(&format!("s{s}_conv2"), conv(ch, 3, 1, 1), &[Src::Node(a)])?;
        let short = if stride == 1 {
            x
        } else {
            Src::Node(g.push(&format!("s{s}_short"), conv(ch, 1, stride, 0), &[x])?)
        };
        let sum = g.push(
            &format!("s{s}_add"),
            Layer::Add(Add),
            &[Src::Node(b), short],
        )?;
        x = Src::Node(g.push(&format!("s{s}_relu2"), relu(), &[Src::Node(sum)])?);
    }
    let p = g.push("pool", Layer::GlobalAvgPool(GlobalAvgPool), &[x])?;
    g.push("fc", dense(classes), &[Src::Node(p)])?;
    g.check()?;
    Ok(g)
}

/// A small network of every kind, for tests: two branches (average pooling and a strided
/// convolution) meeting at an `Add`.
pub fn every_kind(input: Shape, classes: usize) -> Result<Graph, GraphError> {
    let mut g = Graph::new(input, classes);
    let c = g.push("conv", conv(4, 3, 1, 1), &[Src::Input])?;
    let r = g.push("relu", relu(), &[Src::Node(c)])?;
    let m = g.push(
        "max",
        Layer::MaxPool(MaxPool {
            kernel: 2,
            stride: 2,
        }),
        &[Src::Node(r)],
    )?;
    let a = g.push(
        "avg",
        Layer::AvgPool(AvgPool {
            kernel: 2,
            stride: 2,
        }),
        &[Src::Node(r)],
    )?;
    let s = g.push("sum", Layer::Add(Add), &[Src::Node(m), Src::Node(a)])?;
    let gp = g.push("gap", Layer::GlobalAvgPool(GlobalAvgPool), &[Src::Node(s)])?;
    let f = g.push(
        "flat",
        Layer::Flatten(crate::layers::Flatten),
        &[Src::Node(s)],
    )?;
    let d1 = g.push("fc_map", dense(classes), &[Src::Node(f)])?;
    let d2 = g.push(
        "fc_gap",
        Layer::Dense(Dense {
            out: classes,
            bias: false,
        }),
        &[Src::Node(gp)],
    )?;
    g.push("logits", Layer::Add(Add), &[Src::Node(d1), Src::Node(d2)])?;
    g.check()?;
    Ok(g)
}
