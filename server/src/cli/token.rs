//! `kinetoscope token create NAME`.

use crate::config::StoreArgs;

/// Creates a write token, prints it once, stores only its sha256.
pub async fn create(name: &str, store: &StoreArgs) -> anyhow::Result<()> {
    use base64::Engine as _;
    let name = name.trim();
    anyhow::ensure!(
        !name.is_empty() && name.len() <= 100,
        "the token name must be 1 to 100 characters"
    );
    let (db, _) = crate::open_store(store).await?;
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| anyhow::anyhow!("random source: {e}"))?;
    let token = format!(
        "kst_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    );
    db.add_token(
        &crate::api::new_id(),
        name,
        &worker::blobs::sha256_hex(token.as_bytes()),
    )
    .await?;
    db.close().await;
    println!("{token}");
    eprintln!("Token {name:?} created. It is shown once; writes now need `Authorization: Bearer <token>`.");
    Ok(())
}
