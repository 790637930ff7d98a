//! Calls to the server's API, and the upload with progress.

use gloo_net::http::Request;
use kinetoscope_types::*;
use serde::de::DeserializeOwned;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;

/// The answer's JSON, or the server's `detail` when it is an error.
async fn answer<T: DeserializeOwned>(resp: gloo_net::http::Response) -> Result<T, String> {
    if !resp.ok() {
        let status = resp.status();
        return Err(match resp.json::<ApiError>().await {
            Ok(e) => e.detail,
            Err(_) => format!("the server answered {status}"),
        });
    }
    resp.json::<T>().await.map_err(|e| e.to_string())
}

/// Where the dashboard keeps the user's token: the browser's session
/// storage (gone when the tab closes, never sent anywhere but this server).
const TOKEN_KEY: &str = "kinetoscope-token";

fn session() -> Option<web_sys::Storage> {
    web_sys::window().and_then(|w| w.session_storage().ok().flatten())
}

/// The token the user gave this tab, if any.
pub fn token() -> Option<String> {
    session()
        .and_then(|s| s.get_item(TOKEN_KEY).ok().flatten())
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// Keeps `token` for this tab (an empty one forgets it).
pub fn set_token(token: &str) {
    if let Some(s) = session() {
        let t = token.trim();
        let _ = if t.is_empty() {
            s.remove_item(TOKEN_KEY)
        } else {
            s.set_item(TOKEN_KEY, t)
        };
    }
}

/// The `Authorization` header's value for the tab's token, if any.
pub fn authorization() -> Option<String> {
    token().map(|t| format!("Bearer {t}"))
}

/// A request with the tab's token, when there is one.
fn authorized(req: gloo_net::http::RequestBuilder) -> gloo_net::http::RequestBuilder {
    match authorization() {
        Some(a) => req.header("Authorization", &a),
        None => req,
    }
}

/// GETs JSON; an error is the server's `detail` (or what went wrong).
pub async fn get<T: DeserializeOwned>(url: &str) -> Result<T, String> {
    answer(
        authorized(Request::get(url))
            .send()
            .await
            .map_err(|e| e.to_string())?,
    )
    .await
}

/// Sends JSON with a method; returns the answer's JSON.
pub async fn send<B: serde::Serialize, T: DeserializeOwned>(
    method: &str,
    url: &str,
    body: &B,
) -> Result<T, String> {
    let req = match method {
        "PATCH" => Request::patch(url),
        "PUT" => Request::put(url),
        _ => Request::post(url),
    };
    let resp = authorized(req)
        .json(body)
        .map_err(|e| e.to_string())?
        .send()
        .await
        .map_err(|e| e.to_string())?;
    answer(resp).await
}

/// Uploads files as one run (several files are its ranks), reporting bytes
/// sent; calls `done` with the created run or the reason it failed.
pub fn upload(
    files: Vec<web_sys::File>,
    name: &str,
    on_progress: impl Fn(f64, f64) + 'static,
    done: impl FnOnce(Result<Created, String>) + 'static,
) -> Result<(), String> {
    let err = |e: wasm_bindgen::JsValue| format!("{e:?}");
    let form = web_sys::FormData::new().map_err(err)?;
    for f in &files {
        form.append_with_blob_and_filename("file", f, &f.name())
            .map_err(err)?;
    }
    let xhr = web_sys::XmlHttpRequest::new().map_err(err)?;
    let url = format!(
        "/api/runs{}",
        crate::logic::query_string(&[("name".into(), name.to_string())])
    );
    xhr.open("POST", &url).map_err(err)?;
    if let Some(a) = authorization() {
        xhr.set_request_header("Authorization", &a).map_err(err)?;
    }
    let progress =
        Closure::<dyn Fn(web_sys::ProgressEvent)>::new(move |e: web_sys::ProgressEvent| {
            // Also published on `window` so a browser test can see that the
            // progress bar was driven by real progress events.
            if let Some(w) = web_sys::window() {
                let frac = if e.total() > 0.0 {
                    e.loaded() / e.total()
                } else {
                    0.0
                };
                let _ =
                    js_sys::Reflect::set(&w, &"__kinetoscopeUploadProgress".into(), &frac.into());
            }
            on_progress(e.loaded(), e.total());
        });
    xhr.upload()
        .map_err(err)?
        .set_onprogress(Some(progress.as_ref().unchecked_ref()));
    progress.forget();
    let done = std::cell::RefCell::new(Some(done));
    let xhr2 = xhr.clone();
    let finish = Closure::<dyn Fn()>::new(move || {
        let Some(done) = done.borrow_mut().take() else {
            return;
        };
        let status = xhr2.status().unwrap_or(0);
        let text = xhr2.response_text().ok().flatten().unwrap_or_default();
        if status == 201 {
            done(serde_json::from_str::<Created>(&text).map_err(|e| e.to_string()));
        } else if status == 0 {
            done(Err("the upload was interrupted (network error)".into()));
        } else {
            done(Err(serde_json::from_str::<ApiError>(&text)
                .map(|e| e.detail)
                .unwrap_or_else(|_| format!("the server answered {status}"))));
        }
    });
    xhr.set_onloadend(Some(finish.as_ref().unchecked_ref()));
    finish.forget();
    xhr.send_with_opt_form_data(Some(&form)).map_err(err)?;
    Ok(())
}

/// The page's origin (`http://host:port`), for share links.
pub fn origin() -> String {
    web_sys::window()
        .and_then(|w| w.location().origin().ok())
        .unwrap_or_default()
}

/// Copies text to the clipboard.
pub fn copy_to_clipboard(text: &str) {
    if let Some(w) = web_sys::window() {
        let _ = w.navigator().clipboard().write_text(text);
    }
}
