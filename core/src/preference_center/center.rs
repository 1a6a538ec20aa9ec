//! The preference center as stored: its fields, its options (validated into types,
//! so a stored center always renders), and how it is read back.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::ids::WorkspaceName;
use crate::repo::codec::decode;
use crate::repo::keys::{center_key, workspace_prefix};
use crate::store::{Store, StoreError, Table, MAX_SCAN};
use crate::time::Timestamp;

/// The page title when a center has none (the platform's wording is not shown).
pub const DEFAULT_TITLE: &str = "Email Preferences";

/// Longest center name, in characters.
pub const MAX_NAME_CHARS: usize = 255;

/// Whether a center is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CenterState {
    /// Served at its links.
    Active,
    /// Stored, not served.
    Draft,
}

impl CenterState {
    /// Parses `active` or `draft`.
    pub fn parse(text: &str) -> Option<CenterState> {
        match text {
            "active" => Some(CenterState::Active),
            "draft" => Some(CenterState::Draft),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CenterState::Active => "active",
            CenterState::Draft => "draft",
        }
    }
}

/// A `links-tags` entry's `rel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rel {
    /// `icon`
    #[serde(rename = "icon")]
    Icon,
    /// `shortcut icon`
    #[serde(rename = "shortcut icon")]
    ShortcutIcon,
    /// `apple-touch-icon`
    #[serde(rename = "apple-touch-icon")]
    AppleTouchIcon,
}

/// A `links-tags` entry's `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IconType {
    /// `image/png`
    #[serde(rename = "image/png")]
    Png,
    /// `image/svg`
    #[serde(rename = "image/svg")]
    Svg,
    /// `image/gif`
    #[serde(rename = "image/gif")]
    Gif,
    /// `image/x-icon`
    #[serde(rename = "image/x-icon")]
    XIcon,
    /// `image/svg+xml`
    #[serde(rename = "image/svg+xml")]
    SvgXml,
    /// `mask-icon`
    #[serde(rename = "mask-icon")]
    MaskIcon,
}

/// One link tag added to the page's head.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkTag {
    /// `rel`
    pub rel: Rel,
    /// `href`
    pub href: String,
    /// `type`
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<IconType>,
    /// `sizes`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<String>,
    /// `color`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
}

/// The page options (`options` on write, `preference_center_options` on read).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Options {
    /// The `content` of a viewport meta tag.
    #[serde(rename = "meta-viewport-content", default, skip_serializing_if = "Option::is_none")]
    pub viewport: Option<String>,
    /// Link tags (favicons).
    #[serde(rename = "links-tags", default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkTag>,
}

impl Options {
    /// Validates an `options` object: every key known, every value of its type and,
    /// where the spec lists them, one of its values.
    pub fn parse(v: &Value) -> Result<Options, String> {
        let o = v.as_object().ok_or("'options' must be an object")?;
        only_keys(o, &["meta-viewport-content", "links-tags"], "options")?;
        let mut out = Options::default();
        match o.get("meta-viewport-content") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => out.viewport = Some(s.clone()),
            Some(_) => return Err("'options.meta-viewport-content' must be a string".into()),
        }
        match o.get("links-tags") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    out.links.push(link_tag(item, i)?);
                }
            }
            Some(_) => return Err("'options.links-tags' must be an array of objects".into()),
        }
        Ok(out)
    }

    /// The tags the options add to the page's head.
    pub fn head_tags(&self) -> String {
        use super::liquid::escape_html as e;
        let mut out = String::new();
        if let Some(v) = &self.viewport {
            out.push_str(&format!("<meta name=\"viewport\" content=\"{}\">", e(v)));
        }
        for l in &self.links {
            let rel = json!(l.rel);
            out.push_str(&format!("<link rel=\"{}\" href=\"{}\"", e(rel.as_str().unwrap_or("")), e(&l.href)));
            if let Some(t) = l.kind {
                out.push_str(&format!(" type=\"{}\"", e(json!(t).as_str().unwrap_or(""))));
            }
            if let Some(s) = &l.sizes {
                out.push_str(&format!(" sizes=\"{}\"", e(s)));
            }
            if let Some(c) = &l.color {
                out.push_str(&format!(" color=\"{}\"", e(c)));
            }
            out.push('>');
        }
        out
    }
}

fn only_keys(o: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), String> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!("'{what}' has an unknown field '{k}'; allowed: {}", allowed.join(", "))),
        None => Ok(()),
    }
}

fn link_tag(v: &Value, i: usize) -> Result<LinkTag, String> {
    let at = format!("options.links-tags[{i}]");
    let o = v.as_object().ok_or_else(|| format!("'{at}' must be an object"))?;
    only_keys(o, &["rel", "href", "type", "sizes", "color"], &at)?;
    let text = |k: &str| -> Result<Option<String>, String> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("'{at}.{k}' must be a string")),
        }
    };
    let rel = text("rel")?.ok_or_else(|| format!("'{at}.rel' is required"))?;
    let rel = serde_json::from_value(json!(rel))
        .map_err(|_| format!("'{at}.rel' must be one of 'icon', 'shortcut icon', 'apple-touch-icon' (got '{rel}')"))?;
    let href = text("href")?.ok_or_else(|| format!("'{at}.href' is required"))?;
    let kind = match text("type")? {
        None => None,
        Some(t) => Some(serde_json::from_value(json!(t)).map_err(|_| {
            format!(
                "'{at}.type' must be one of 'image/png', 'image/svg', 'image/gif', 'image/x-icon', \
                 'image/svg+xml', 'mask-icon' (got '{t}')"
            )
        })?),
    };
    Ok(LinkTag { rel, href, kind, sizes: text("sizes")?, color: text("color")? })
}

/// A stored preference center.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Center {
    /// `preference_center_api_id`
    pub id: String,
    /// Unique per workspace; never changes.
    pub name: String,
    /// `preference_center_title`, if one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The preference page's template (checked when stored).
    pub page_html: String,
    /// The confirmation page's template (checked when stored).
    pub confirmation_html: String,
    /// Served or not.
    pub state: CenterState,
    /// Head tags.
    #[serde(default)]
    pub options: Options,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last update.
    pub updated_at: Timestamp,
}

impl Center {
    /// The title the pages show.
    pub fn title(&self) -> &str {
        self.title.as_deref().unwrap_or(DEFAULT_TITLE)
    }

    /// The list entry.
    pub fn summary(&self) -> Value {
        json!({
            "name": self.name,
            "preference_center_api_id": self.id,
            "created_at": self.created_at.to_rfc3339_seconds(),
            "updated_at": self.updated_at.to_rfc3339_seconds(),
        })
    }

    /// The detail read.
    pub fn detail(&self) -> Value {
        json!({
            "name": self.name,
            "preference_center_api_id": self.id,
            "created_at": self.created_at.to_rfc3339_seconds(),
            "updated_at": self.updated_at.to_rfc3339_seconds(),
            "preference_center_title": self.title(),
            "preference_center_page_html": self.page_html,
            "confirmation_page_html": self.confirmation_html,
            // Engage has no redirect page: a submission renders the confirmation page.
            "redirect_page_html": Value::Null,
            "preference_center_options": self.options,
            "state": self.state.as_str(),
        })
    }
}

/// Whether `name` is a valid center name: letters, digits, `-` and `_`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Reads a center by api id.
pub async fn get<S: Store>(store: &S, ws: &WorkspaceName, id: &str) -> Result<Option<Center>, StoreError> {
    if id.is_empty() || id.chars().any(char::is_control) {
        return Ok(None);
    }
    match store.get(Table::PreferenceCenter, &center_key(ws, id)).await? {
        Some(e) => Ok(Some(decode(&e.value)?)),
        None => Ok(None),
    }
}

/// Every center of a workspace, oldest first.
pub async fn list<S: Store>(store: &S, ws: &WorkspaceName) -> Result<Vec<Center>, StoreError> {
    let entries = store.scan(Table::PreferenceCenter, &workspace_prefix(ws), MAX_SCAN).await?;
    let mut centers = entries.iter().map(|(_, e)| decode::<Center>(&e.value)).collect::<Result<Vec<_>, _>>()?;
    centers.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Ok(centers)
}
