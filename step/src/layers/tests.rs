//! Each kind's wire fields and shapes.

use super::*;

#[test]
fn every_kind_round_trips_its_wire_fields() {
    let kinds = [
        Layer::Dense(Dense {
            out: 7,
            bias: false,
        }),
        Layer::Conv2d(Conv2d {
            out_ch: 3,
            kernel: 5,
            stride: 2,
            pad: 2,
            bias: true,
        }),
        Layer::Relu(Relu),
        Layer::MaxPool(MaxPool {
            kernel: 3,
            stride: 2,
        }),
        Layer::AvgPool(AvgPool {
            kernel: 2,
            stride: 2,
        }),
        Layer::GlobalAvgPool(GlobalAvgPool),
        Layer::Flatten(Flatten),
        Layer::Add(Add),
    ];
    let mut tags = Vec::new();
    for l in kinds {
        let (tag, f) = l.wire();
        let f16: Vec<u16> = f.iter().map(|&v| v as u16).collect();
        assert_eq!(Layer::wire_fields(tag), Some(f.len()), "{l:?}");
        assert_eq!(Layer::from_wire(tag, &f16), Some(l));
        tags.push(tag);
    }
    tags.dedup();
    assert_eq!(tags.len(), kinds.len(), "tags are unique");
    assert_eq!(Layer::wire_fields(8), None);
    assert_eq!(Layer::from_wire(0, &[3, 2]), None, "a bias flag of 2");
}

#[test]
fn shapes_of_each_kind() {
    let x = Shape { c: 3, h: 7, w: 7 };
    let s = |l: Layer| l.out_shape(&[x]);
    assert_eq!(
        s(Layer::Conv2d(Conv2d {
            out_ch: 4,
            kernel: 3,
            stride: 2,
            pad: 1,
            bias: true
        })),
        Ok(Shape { c: 4, h: 4, w: 4 })
    );
    assert_eq!(
        s(Layer::MaxPool(MaxPool {
            kernel: 3,
            stride: 2
        })),
        Ok(Shape { c: 3, h: 3, w: 3 })
    );
    assert_eq!(
        s(Layer::AvgPool(AvgPool {
            kernel: 2,
            stride: 2
        })),
        Ok(Shape { c: 3, h: 3, w: 3 })
    );
    assert_eq!(s(Layer::GlobalAvgPool(GlobalAvgPool)), Ok(Shape::flat(3)));
    assert_eq!(s(Layer::Flatten(Flatten)), Ok(Shape::flat(147)));
    assert_eq!(
        s(Layer::Dense(Dense { out: 5, bias: true })),
        Ok(Shape::flat(5))
    );
    assert!(s(Layer::MaxPool(MaxPool {
        kernel: 8,
        stride: 1
    }))
    .is_err());
    assert!(s(Layer::MaxPool(MaxPool {
        kernel: 2,
        stride: 0
    }))
    .is_err());
    assert!(s(Layer::Dense(Dense { out: 0, bias: true })).is_err());
    let conv = Layer::Conv2d(Conv2d {
        out_ch: 4,
        kernel: 3,
        stride: 1,
        pad: 1,
        bias: false,
    });
    assert_eq!(conv.params(&[x]).len(), 1, "no bias, no bias tensor");
    assert_eq!(conv.macs(&[x], Shape { c: 4, h: 7, w: 7 }), 4 * 49 * 27);
}
