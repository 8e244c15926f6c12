//! QR codes of short links, as SVG (the `qrcode` crate; error correction M, which survives a
//! smudged print and keeps the code small).

/// The SVG of a QR code holding `text`; `None` when it is too long for a QR code.
pub fn svg(text: &str) -> Option<String> {
    let code =
        qrcode::QrCode::with_error_correction_level(text.as_bytes(), qrcode::EcLevel::M).ok()?;
    Some(
        code.render::<qrcode::render::svg::Color>()
            .min_dimensions(200, 200)
            .quiet_zone(true)
            .build(),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn svg_of_a_short_url() {
        let svg = super::svg("https://go.example.com/abc1234").expect("fits");
        assert!(svg.starts_with("<?xml"), "{}", &svg[..40]);
        assert!(svg.contains("<svg") && svg.contains("</svg>"));
        assert!(super::svg(&"x".repeat(5000)).is_none());
    }
}
