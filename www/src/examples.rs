//! A ready request for every public endpoint. The list comes from the core's route
//! table, so an endpoint added there shows up in the playground by itself (with a
//! generic request until an example is written for it below).

use engage_core::api::{Auth, ROUTES};
use engage_core::provision::Permission;
use serde_json::{json, Value};

/// One public route: what the picker lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteInfo {
    /// `GET`, `POST`, ...
    pub method: &'static str,
    /// The path pattern, with `{}` for a path parameter.
    pub pattern: &'static str,
    /// The permission the route needs, or `SCIM token`.
    pub permission: &'static str,
}

/// A request ready to send.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    /// The route it exercises.
    pub route: RouteInfo,
    /// Path (without the query).
    pub path: String,
    /// Query string without `?` (percent-encoded), possibly empty.
    pub query: String,
    /// Headers, in order.
    pub headers: Vec<(String, String)>,
    /// Pretty-printed JSON body, or empty.
    pub body: String,
}

/// Every route of the public API (the operator routes under `/_engage/` excluded).
pub fn public_routes() -> Vec<RouteInfo> {
    ROUTES
        .iter()
        .filter(|r| r.is_platform_api())
        .map(|r| RouteInfo {
            method: r.method.as_str(),
            pattern: r.pattern,
            permission: match r.auth {
                Auth::Key(p, _) => p.as_str(),
                Auth::Scim => Permission::Scim.as_str(),
                Auth::Admin | Auth::SignIn => "admin token",
                Auth::Public => "none",
            },
        })
        .collect()
}

const USER: &str = "user-1";
const EMAIL: &str = "ada@example.com";
const TIME: &str = "2024-05-01T10:00:00Z";

/// The example path, query and body of a route, if one was written for it.
fn specific(method: &str, pattern: &str, group_id: &str) -> Option<(&'static str, String, Option<Value>)> {
    let pc = "PREFERENCE_CENTER_API_ID";
    Some(match (method, pattern) {
        ("POST", "/users/track") => (
            "",
            String::new(),
            Some(json!({
                "attributes": [{"external_id": USER, "first_name": "Ada", "email": EMAIL, "favorite_color": "blue"}],
                "events": [{"external_id": USER, "name": "played_song", "time": TIME, "properties": {"genre": "jazz"}}],
                "purchases": [{"external_id": USER, "product_id": "premium", "currency": "USD", "price": 9.99, "quantity": 1, "time": TIME}]
            })),
        ),
        ("POST", "/users/track/sync") => (
            "",
            String::new(),
            Some(json!({
                "attributes": [{"external_id": USER, "favorite_color": "green"}]
            })),
        ),
        ("POST", "/users/export/ids") => (
            "",
            String::new(),
            Some(json!({
                "external_ids": [USER]
            })),
        ),
        ("POST", "/users/identify") => (
            "",
            String::new(),
            Some(json!({
                "aliases_to_identify": [{"external_id": USER, "user_alias": {"alias_name": "visitor-42", "alias_label": "web_visitor"}}]
            })),
        ),
        ("POST", "/users/merge") => (
            "",
            String::new(),
            Some(json!({
                "merge_updates": [{"identifier_to_merge": {"external_id": "user-2"}, "identifier_to_keep": {"external_id": USER}}]
            })),
        ),
        ("POST", "/users/delete") => (
            "",
            String::new(),
            Some(json!({
                "external_ids": ["user-2"]
            })),
        ),
        ("POST", "/users/alias/new") => (
            "",
            String::new(),
            Some(json!({
                "user_aliases": [{"external_id": USER, "alias_name": "ada-crm", "alias_label": "crm_id"}]
            })),
        ),
        ("POST", "/users/alias/update") => (
            "",
            String::new(),
            Some(json!({
                "alias_updates": [{"alias_label": "crm_id", "old_alias_name": "ada-crm", "new_alias_name": "ada-crm-2"}]
            })),
        ),
        ("POST", "/users/external_ids/rename") => (
            "",
            String::new(),
            Some(json!({"external_id_renames": [{"current_external_id": "user-1", "new_external_id": "customer-1"}]})),
        ),
        ("POST", "/users/external_ids/remove") => ("", String::new(), Some(json!({"external_ids": ["user-1"]}))),
        ("POST", "/subscription/status/set") => (
            "",
            String::new(),
            Some(json!({
                "subscription_group_id": group_id, "subscription_state": "subscribed", "external_id": [USER]
            })),
        ),
        ("POST", "/v2/subscription/status/set") => (
            "",
            String::new(),
            Some(json!({
                "subscription_groups": [{"subscription_group_id": group_id, "subscription_state": "unsubscribed", "emails": [EMAIL]}]
            })),
        ),
        ("GET", "/subscription/user/status") => ("", format!("external_id%5B%5D={USER}"), None),
        ("GET", "/subscription/status/get") => {
            ("", format!("subscription_group_id={group_id}&external_id={USER}"), None)
        }
        ("POST", "/email/status") => (
            "",
            String::new(),
            Some(json!({
                "email": EMAIL, "subscription_state": "opted_in"
            })),
        ),
        ("GET", "/email/hard_bounces") => ("", "start_date=2026-01-01&end_date=2026-12-31".to_string(), None),
        ("GET", "/email/unsubscribes") => {
            ("", "start_date=2026-01-01&end_date=2026-12-31&sort_direction=desc".to_string(), None)
        }
        ("POST", "/email/bounce/remove") | ("POST", "/email/spam/remove") => {
            ("", String::new(), Some(json!({"email": ["bounced@example.com"]})))
        }
        ("GET", "/sms/invalid_phone_numbers") => ("", "start_date=2026-01-01&end_date=2026-12-31".to_string(), None),
        ("POST", "/sms/invalid_phone_numbers/remove") => {
            ("", String::new(), Some(json!({"phone_numbers": ["12183095514"]})))
        }
        ("POST", "/email/blacklist") | ("POST", "/email/blocklist") => (
            "",
            String::new(),
            Some(json!({
                "email": ["bounced@example.com"]
            })),
        ),
        ("POST", "/preference_center/v1") => (
            "",
            String::new(),
            Some(json!({
                "name": "newsletter_preferences",
                "preference_center_title": "Your email preferences",
                "preference_center_page_html": page_html(group_id),
                "confirmation_page_html": "<html><body><p>Saved. Email: {{subscribed_state.${email_global}}}.</p></body></html>",
                "state": "active",
                "options": {"meta-viewport-content": "width=device-width, initial-scale=1"}
            })),
        ),
        ("PUT", "/preference_center/v1/{}") => (
            pc,
            String::new(),
            Some(json!({
                "preference_center_page_html": page_html(group_id),
                "confirmation_page_html": "<html><body><p>Saved again.</p></body></html>",
                "state": "draft"
            })),
        ),
        ("GET", "/preference_center/v1/list") => ("", String::new(), None),
        ("GET", "/preference_center/v1/{}") => (pc, String::new(), None),
        ("GET", "/preference_center/v1/{}/url/{}") => ("PREFERENCE_CENTER_API_ID|user-1", String::new(), None),
        ("GET", "/scim/v2/Users") => ("", "filter=userName%20eq%20%22ada%40example.com%22".into(), None),
        ("POST", "/scim/v2/Users") => (
            "",
            String::new(),
            Some(json!({
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
                "userName": EMAIL, "name": {"givenName": "Ada", "familyName": "Lovelace"}, "department": "finance"
            })),
        ),
        ("GET", "/scim/v2/Users/{}") | ("DELETE", "/scim/v2/Users/{}") => ("SCIM_USER_ID", String::new(), None),
        ("PUT", "/scim/v2/Users/{}") => (
            "SCIM_USER_ID",
            String::new(),
            Some(json!({
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
                "userName": EMAIL, "name": {"givenName": "Ada", "familyName": "Byron"}, "department": "engineering",
                "permissions": {
                    "companyPermissions": ["manage_company_settings"],
                    "roles": [{"roleName": "Editor"}],
                    "appGroup": [{"appGroupName": "playground", "appGroupPermissions": ["basic_access", "export_user_data"],
                                  "team": [{"teamName": "Growth", "teamPermissions": ["basic_access"]}]}]
                }
            })),
        ),
        ("PATCH", "/scim/v2/Users/{}") => (
            "SCIM_USER_ID",
            String::new(),
            Some(json!({
                "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                "Operations": [{"op": "replace", "path": "department", "value": "marketing"}]
            })),
        ),
        ("POST", "/scim/v2/Users/.search") | ("POST", "/scim/v2/.search") => (
            "",
            String::new(),
            Some(json!({
                "schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"],
                "filter": "userName eq \"ada@example.com\"", "attributes": ["userName", "name"]
            })),
        ),
        ("GET", "/scim/v2/ServiceProviderConfig") | ("GET", "/scim/v2/ResourceTypes") | ("GET", "/scim/v2/Schemas") => {
            ("", String::new(), None)
        }
        ("GET", "/scim/v2/ResourceTypes/{}") => ("User", String::new(), None),
        ("GET", "/scim/v2/Schemas/{}") => ("urn:ietf:params:scim:schemas:core:2.0:User", String::new(), None),
        // Not offered (501): shown so that what a provider sends there is answered here too.
        ("GET", "/scim/v2/Me") | ("DELETE", "/scim/v2/Me") => ("", String::new(), None),
        ("POST", "/scim/v2/Me") | ("PUT", "/scim/v2/Me") | ("PATCH", "/scim/v2/Me") => (
            "",
            String::new(),
            Some(json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": EMAIL})),
        ),
        ("POST", "/scim/v2/Bulk") => (
            "",
            String::new(),
            Some(json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:BulkRequest"], "Operations": []})),
        ),
        ("GET", "/cdi/integrations") => ("", String::new(), None),
        ("GET", "/cdi/integrations/{}/job_sync_status") => ("INTEGRATION_ID", String::new(), None),
        _ => return None,
    })
}

/// A preference page that shows the global email state and the example group, as
/// checkboxes of one form.
fn page_html(group_id: &str) -> String {
    format!(
        "<html><body><h1>Hello {{{{ ${{first_name}} | default: 'there' }}}}</h1>\n\
         <form method=\"post\" action=\"{{{{preference_center_submit_url}}}}\">\n\
         <label><input type=\"checkbox\" name=\"{{% form_field_name :email_global_state %}}\" value=\"opted_in\" \
         {{% if subscribed_state.${{email_global}} != 'unsubscribed' %}}checked{{% endif %}}> All email</label>\n\
         <label><input type=\"checkbox\" name=\"{{% form_field_name :subscription_group {group_id} %}}\" value=\"subscribed\" \
         {{% if subscribed_state.${{{group_id}}} == 'subscribed' %}}checked{{% endif %}}> Newsletter</label>\n\
         <button type=\"submit\">Save</button>\n</form></body></html>"
    )
}

/// A ready request for every public route, authorised with `key` (SCIM routes with
/// `scim_token` and the session's origin). `group_id` fills the subscription examples.
pub fn examples(key: &str, scim_token: &str, group_id: &str) -> Vec<Example> {
    public_routes()
        .into_iter()
        .map(|route| {
            let (param, query, body) = specific(route.method, route.pattern, group_id).unwrap_or_else(|| {
                let body = matches!(route.method, "POST" | "PUT" | "PATCH").then(|| json!({}));
                ("ID", String::new(), body)
            });
            // `a|b` fills a route's parameters in turn; one value fills them all.
            let path = if param.contains('|') {
                param.split('|').fold(route.pattern.to_string(), |p, v| p.replacen("{}", v, 1))
            } else {
                route.pattern.replace("{}", param)
            };
            let mut headers = Vec::new();
            if route.permission == Permission::Scim.as_str() {
                headers.push(("Authorization".to_string(), format!("Bearer {scim_token}")));
                headers.push(("X-Request-Origin".to_string(), crate::session::SCIM_ORIGIN.to_string()));
            } else {
                headers.push(("Authorization".to_string(), format!("Bearer {key}")));
            }
            if body.is_some() {
                headers.push(("Content-Type".to_string(), "application/json".to_string()));
            }
            let body = body.map(|b| serde_json::to_string_pretty(&b).unwrap_or_default()).unwrap_or_default();
            Example { route, path, query, headers, body }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use engage_core::api::find;
    use engage_core::Method;

    #[test]
    fn every_public_route_has_an_example_that_routes_to_it() {
        let all = examples("k", "s", "g");
        assert_eq!(all.len(), public_routes().len());
        assert!(all.iter().all(|e| !e.route.pattern.starts_with("/_engage/")));
        for e in &all {
            let (route, _) = find(Method::parse(e.route.method), &e.path).expect("the example's path routes");
            assert_eq!(route.pattern, e.route.pattern, "{} {}", e.route.method, e.path);
            if !e.body.is_empty() {
                serde_json::from_str::<Value>(&e.body).expect("the example body is JSON");
            }
        }
    }

    #[test]
    fn every_current_route_has_a_written_example() {
        // New routes fall back to a generic request; this lists the ones to write.
        let missing: Vec<_> = public_routes()
            .into_iter()
            .filter(|r| specific(r.method, r.pattern, "g").is_none())
            .map(|r| format!("{} {}", r.method, r.pattern))
            .collect();
        assert!(missing.is_empty(), "routes without a written example: {missing:?}");
    }

    #[test]
    fn key_routes_carry_the_key_and_scim_routes_the_scim_token() {
        let all = examples("secret", "scim-secret", "g");
        let track = all.iter().find(|e| e.route.pattern == "/users/track").unwrap();
        assert!(track.headers.contains(&("Authorization".into(), "Bearer secret".into())));
        assert!(track.headers.contains(&("Content-Type".into(), "application/json".into())));
        let scim = all.iter().find(|e| e.route.pattern == "/scim/v2/Users" && e.route.method == "GET").unwrap();
        assert!(scim.headers.contains(&("Authorization".into(), "Bearer scim-secret".into())));
        assert!(scim.headers.iter().any(|(n, _)| n == "X-Request-Origin"));
        let list = all.iter().find(|e| e.route.pattern == "/preference_center/v1/list").unwrap();
        assert!(list.body.is_empty());
        assert!(list.headers.iter().all(|(n, _)| n != "Content-Type"));
    }
}
