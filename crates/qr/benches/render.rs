//! Renders per second of a typical short link, against a baseline that only
//! builds the bare QR matrix, so the ratio shows what rendering adds.
//!
//! `cargo bench -p shortlink-qr -- --warm-up-time 1 --measurement-time 3`

#![expect(
    missing_docs,
    reason = "criterion_group! defines an undocumented pub fn"
)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use qrcode::{EcLevel, QrCode};
use shortlink_qr::{Format, Options, render};

const URL: &str = "http://127.0.0.1:8080/AbC123x";

fn baseline(c: &mut Criterion) {
    let mut group = c.benchmark_group("baseline");
    group.throughput(Throughput::Elements(1));
    group.bench_function("qrcode_matrix", |b| {
        b.iter(|| QrCode::with_error_correction_level(black_box(URL), EcLevel::M))
    });
    group.finish();
}

fn render_512(c: &mut Criterion) {
    let mut group = c.benchmark_group("render_512");
    group.throughput(Throughput::Elements(1));
    for format in [Format::Svg, Format::Png] {
        let opts = Options {
            format,
            ..Options::default()
        };
        group.bench_function(format.as_str(), |b| {
            b.iter(|| render(black_box(URL), &opts))
        });
    }
    group.finish();
}

fn render_4096(c: &mut Criterion) {
    let mut group = c.benchmark_group("render_4096");
    group.throughput(Throughput::Elements(1));
    let opts = Options {
        format: Format::Png,
        size: 4096,
        ..Options::default()
    };
    group.bench_function("png", |b| b.iter(|| render(black_box(URL), &opts)));
    group.finish();
}

criterion_group!(benches, baseline, render_512, render_4096);
criterion_main!(benches);
