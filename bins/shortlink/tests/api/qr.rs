//! `GET /api/v1/qr`: images that scan back to the short URL, exact sizes, named parameter
//! errors, caching validators, and the JSON form.

use std::io::Cursor;

use base64::Engine;
use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{
    LINK_FIELDS, TestApp, assert_error, assert_has_fields, assert_invalid, assert_ok, header, send,
    text,
};

/// Decodes a PNG and reads the one QR code in it with rqrr; returns (width, height, text).
fn scan_png(bytes: &[u8]) -> (u32, u32, String) {
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().expect("a valid PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a bounded image")];
    let frame = reader.next_frame(&mut buf).expect("one frame");
    let (width, height) = (frame.width, frame.height);
    let channels = match frame.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => panic!("palette is expanded"),
    };
    assert_eq!(frame.bit_depth, png::BitDepth::Eight, "expanded to 8 bits");
    let pixels = &buf[..frame.buffer_size()];
    let luma = |x: usize, y: usize| {
        let p = &pixels[(y * width as usize + x) * channels..];
        if channels >= 3 {
            ((u32::from(p[0]) * 299 + u32::from(p[1]) * 587 + u32::from(p[2]) * 114) / 1000) as u8
        } else {
            p[0]
        }
    };
    let mut prepared =
        rqrr::PreparedImage::prepare_from_greyscale(width as usize, height as usize, luma);
    let grids = prepared.detect_grids();
    assert_eq!(grids.len(), 1, "one QR code in the image");
    let (_, decoded) = grids[0].decode().expect("the code decodes");
    (width, height, decoded)
}

/// The opening `<svg …>` tag of a document.
fn svg_tag(svg: &str) -> &str {
    let start = svg.find("<svg").expect("an <svg> element");
    let end = start + svg[start..].find('>').expect("the tag ends");
    &svg[start..=end]
}

async fn link(app: &TestApp) -> Value {
    app.create_link(&json!({ "destination": "https://example.com/qr", "customSlug": "qr-code" }))
        .await
}

#[tokio::test]
async fn png_codes_scan_back_to_the_short_url_at_their_exact_size() {
    let app = TestApp::spawn().await;
    let link = link(&app).await;
    let short_url = text(&link["shortUrl"]);
    // (query, size, whether to decode): a code without a quiet zone needs one added before a
    // reader finds it, and decoding 16 million pixels takes seconds, so those two are only
    // measured.
    for (query, size, decode) in [
        ("format=png", 512, true),
        ("format=PNG&size=64", 64, true),
        ("format=Png&size=300&margin=2&level=H", 300, true),
        (
            "format=png&size=777&level=L&fg=%23102030&bg=%23fafafa",
            777,
            true,
        ),
        ("format=png&size=1000&margin=0", 1000, false),
        ("format=png&size=4096&level=Q", 4096, false),
    ] {
        let res = app.get(&format!("/qr?shortCode=qr-code&{query}")).await;
        assert_eq!(res.status(), 200, "{query}");
        assert_eq!(header(res.headers(), "content-type"), Some("image/png"));
        assert!(header(res.headers(), "cache-control").is_some());
        assert!(header(res.headers(), "etag").is_some());
        let bytes = res.bytes().await.expect("a body");
        if decode {
            let (w, h, decoded) = scan_png(&bytes);
            assert_eq!((w, h), (size, size), "{query}");
            assert_eq!(decoded, short_url, "{query}");
        } else {
            let reader = png::Decoder::new(Cursor::new(bytes.as_ref()))
                .read_info()
                .expect("a valid PNG");
            assert_eq!((reader.info().width, reader.info().height), (size, size));
        }
    }
}

#[tokio::test]
async fn svg_is_the_default_with_its_size_and_a_view_box() {
    let app = TestApp::spawn().await;
    link(&app).await;
    for (query, size) in [
        ("", 512),
        ("&format=svg&size=64", 64),
        ("&format=SVG&size=4096", 4096),
    ] {
        let res = app.get(&format!("/qr?shortCode=qr-code{query}")).await;
        assert_eq!(res.status(), 200, "{query}");
        assert_eq!(header(res.headers(), "content-type"), Some("image/svg+xml"));
        let svg = res.text().await.expect("a text body");
        let tag = svg_tag(&svg);
        assert!(tag.contains(&format!(r#"width="{size}""#)), "{tag}");
        assert!(tag.contains(&format!(r#"height="{size}""#)), "{tag}");
        assert!(tag.contains("viewBox=\""), "{tag}");
    }
}

#[tokio::test]
async fn a_link_is_found_by_slug_and_by_id_alike() {
    let app = TestApp::spawn().await;
    let link = link(&app).await;
    let by_slug = app.get("/qr?shortCode=qr-code&format=png").await;
    let by_id = app
        .get(&format!("/qr?shortCode={}&format=png", text(&link["id"])))
        .await;
    assert_eq!(by_slug.status(), 200);
    assert_eq!(by_id.status(), 200);
    let (a, b) = (
        by_slug.bytes().await.expect("a body"),
        by_id.bytes().await.expect("a body"),
    );
    assert_eq!(a, b);
    assert_eq!(scan_png(&b).2, text(&link["shortUrl"]));
}

#[tokio::test]
async fn bad_parameters_are_400_naming_the_parameter() {
    let app = TestApp::spawn().await;
    link(&app).await;
    for (query, field) in [
        ("size=63", "size"),
        ("size=4097", "size"),
        ("size=abc", "size"),
        ("size=-1", "size"),
        ("margin=17", "margin"),
        ("margin=x", "margin"),
        ("level=X", "level"),
        ("fg=red", "fg"),
        ("fg=%23ggg000", "fg"),
        ("bg=%23fff", "bg"),
        // One colour is a blank square.
        ("fg=%23ffffff", "bg"),
        ("fg=%23AbCdEf&bg=%23abcdef", "bg"),
        ("format=gif", "format"),
        ("format=", "format"),
    ] {
        let res = app.get(&format!("/qr?shortCode=qr-code&{query}")).await;
        let error = assert_invalid(res, &[field]).await;
        assert!(text(&error["message"]).contains(field), "{query}: {error}");
    }
    for query in ["", "shortCode=", "format=png"] {
        let res = app.get(&format!("/qr?{query}")).await;
        assert_invalid(res, &["shortCode"]).await;
    }
}

#[tokio::test]
async fn unknown_links_and_other_workspaces_links_are_404() {
    let app = TestApp::spawn().await;
    let link = link(&app).await;
    assert_error(app.get("/qr?shortCode=nope").await, 404, "NOT_FOUND").await;
    let other = app.new_tenant("other", 100).await;
    for r in [text(&link["shortCode"]), text(&link["id"])] {
        let res = send(app.api_as(&other.key, Method::GET, &format!("/qr?shortCode={r}"))).await;
        assert_error(res, 404, "NOT_FOUND").await;
    }
    let res = send(app.client.get(app.url("/api/v1/qr?shortCode=qr-code"))).await;
    assert_error(res, 401, "UNAUTHORIZED").await;
}

#[tokio::test]
async fn a_repeat_with_if_none_match_is_304() {
    let app = TestApp::spawn().await;
    link(&app).await;
    let path = "/qr?shortCode=qr-code&format=png&size=256";
    let first = app.get(path).await;
    assert_eq!(first.status(), 200);
    let etag = header(first.headers(), "etag").expect("an ETag").to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");

    assert_eq!(header(first.headers(), "vary"), Some("Accept"));
    assert_eq!(
        header(first.headers(), "cache-control"),
        Some("private, no-cache"),
        "asked again each time: the short URL changes with the slug"
    );
    let again = send(app.api(Method::GET, path).header("if-none-match", &etag)).await;
    assert_eq!(again.status(), 304);
    assert_eq!(header(again.headers(), "etag"), Some(etag.as_str()));
    assert!(again.bytes().await.expect("a body").is_empty());
    // The weak comparison: a proxy that compresses may have weakened the tag.
    let weak = send(
        app.api(Method::GET, path)
            .header("if-none-match", format!("W/{etag}")),
    )
    .await;
    assert_eq!(weak.status(), 304);

    // Other options are another image.
    let svg = app.get("/qr?shortCode=qr-code&size=256").await;
    assert_ne!(header(svg.headers(), "etag"), Some(etag.as_str()));
    let other = send(
        app.api(Method::GET, "/qr?shortCode=qr-code&format=png&size=257")
            .header("if-none-match", &etag),
    )
    .await;
    assert_eq!(other.status(), 200);

    // A new slug is another short URL, so another image under the same link id.
    let link: Value = app.get("/links/qr-code").await.json().await.unwrap();
    let id = text(&link["data"]["id"]);
    let by_id = format!("/qr?shortCode={id}&format=png&size=256");
    let before = send(app.api(Method::GET, &by_id).header("if-none-match", &etag)).await;
    assert_eq!(before.status(), 304);
    assert_ok(
        app.patch_json("/links/qr-code", &json!({"customSlug": "qr-new"}))
            .await,
    )
    .await;
    let after = send(app.api(Method::GET, &by_id).header("if-none-match", &etag)).await;
    assert_eq!(after.status(), 200);
    assert_ne!(header(after.headers(), "etag"), Some(etag.as_str()));
}

/// `Accept` as RFC 9110 reads it: q-values, case, and a wildcard beside JSON.
#[tokio::test]
async fn accept_chooses_json_only_where_it_is_preferred() {
    let app = TestApp::spawn().await;
    link(&app).await;
    for (accept, content_type) in [
        ("application/json", "application/json"),
        ("APPLICATION/JSON", "application/json"),
        ("application/json, text/plain, */*", "application/json"),
        ("application/json;q=0", "image/png"),
        ("application/json;q=0.1, image/png", "image/png"),
        ("application/json;q=0.5, image/*;q=0.4", "application/json"),
        ("*/*", "image/png"),
        ("text/html", "image/png"),
    ] {
        let res = send(
            app.api(Method::GET, "/qr?shortCode=qr-code&format=png")
                .header("accept", accept),
        )
        .await;
        assert_eq!(res.status(), 200, "{accept}");
        let got = header(res.headers(), "content-type").unwrap_or_default();
        assert_eq!(got, content_type, "{accept}");
    }
}

#[tokio::test]
async fn accept_json_answers_the_link_with_the_image_as_a_data_uri() {
    let app = TestApp::spawn().await;
    let link = link(&app).await;
    let res = send(
        app.api(Method::GET, "/qr?shortCode=qr-code")
            .header("accept", "application/json"),
    )
    .await;
    let data = assert_ok(res).await;
    assert_has_fields(&data, &LINK_FIELDS);
    for field in LINK_FIELDS {
        assert_eq!(data[field], link[field], "{field}");
    }
    let uri = text(&data["qr"]);
    let encoded = uri
        .strip_prefix("data:image/svg+xml;base64,")
        .unwrap_or_else(|| panic!("an SVG data URI: {}", &uri[..40.min(uri.len())]));
    let svg = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("valid base64");
    let svg = String::from_utf8(svg).expect("SVG is text");
    assert!(svg_tag(&svg).contains(r#"width="512""#));

    let res = send(
        app.api(Method::GET, "/qr?shortCode=qr-code&format=png&size=200")
            .header("accept", "application/json"),
    )
    .await;
    let data = assert_ok(res).await;
    let png = text(&data["qr"])
        .strip_prefix("data:image/png;base64,")
        .expect("a PNG data URI");
    let png = base64::engine::general_purpose::STANDARD
        .decode(png)
        .expect("valid base64");
    let (w, h, decoded) = scan_png(&png);
    assert_eq!((w, h), (200, 200));
    assert_eq!(decoded, text(&link["shortUrl"]));
}
