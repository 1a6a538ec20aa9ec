use serde_json::{json, Value};

use super::*;
use crate::scim::error::ScimType;
use crate::scim::evaluate::matches;

/// A user as the server renders it.
fn ada() -> Value {
    json!({
        "schemas": [USER_URN, ENTERPRISE_URN],
        "id": "2f9c-ada",
        "externalId": "00u-ADA",
        "userName": "Ada@Example.com",
        "name": {"givenName": "Ada", "familyName": "Lovelace"},
        "active": true,
        "department": "engineering",
        "createdAt": "Monday, May 6, 2024 10:00:00 AM",
        "meta": {"resourceType": "User", "created": "2024-05-06T10:00:00.000Z",
                 "lastModified": "2024-06-01T08:30:00.000Z", "version": "W/\"3\""},
        "permissions": {
            "companyPermissions": ["admin", "manage_company_settings"],
            "roles": [{"roleName": "Marketer", "roleId": "r-1"}, {"roleName": "Analyst"}],
            "appGroup": [
                {"appGroupName": "Shop", "appGroupPermissions": ["view_campaigns", "edit_campaigns"]},
                {"appGroupId": "ag-2", "appGroupPermissions": ["view_segments"]},
            ],
        },
        ENTERPRISE_URN: {"department": "engineering"},
    })
}

fn eval(text: &str) -> bool {
    match parse(text) {
        Ok(f) => matches(&f, &ada()),
        Err(e) => panic!("{text}: {e:?}"),
    }
}

fn err(text: &str) -> String {
    match parse(text) {
        Err(ScimError::Bad(ScimType::InvalidFilter, d)) => d,
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn user_name_eq_in_its_spellings_uses_the_index() {
    for (text, want) in [
        (r#"userName eq "ada@example.com""#, "ada@example.com"),
        (r#"USERNAME EQ "Ada@Example.com""#, "Ada@Example.com"),
        (r#"  userName   eq   "a b"  "#, "a b"),
        (r#"urn:ietf:params:scim:schemas:core:2.0:User:userName eq "x""#, "x"),
        (r#"userName eq "q\"uote\\d\u0041""#, "q\"uote\\dA"),
    ] {
        assert_eq!(parse(text).unwrap().user_name_eq(), Some(want), "{text}");
    }
    assert_eq!(parse(r#"userName eq "a" and active eq true"#).unwrap().user_name_eq(), None);
}

#[test]
fn every_operator_by_the_attributes_type_and_case_rule() {
    // userName ignores case; id and externalId do not.
    assert!(eval(r#"userName eq "ADA@example.COM""#));
    assert!(eval(r#"externalId eq "00u-ADA""#));
    assert!(!eval(r#"externalId eq "00u-ada""#));
    assert!(!eval(r#"id eq "2F9C-ADA""#));
    assert!(eval(r#"userName ne "grace@example.com""#));
    assert!(eval(r#"userName co "@EXAMPLE""#));
    assert!(eval(r#"userName sw "ada@""#));
    assert!(eval(r#"userName ew ".com""#));
    assert!(eval(r#"name.familyName gt "Byron" and name.familyName lt "M""#));
    assert!(eval(r#"name.givenName ge "ada" and name.givenName le "ADA""#));
    assert!(!eval(r#"meta.created lt "2024-05-06T12:00:00+02:00""#));
    assert!(eval(r#"meta.created ge "2024-05-06T12:00:00+02:00""#));
    assert!(eval(r#"meta.lastModified gt "2024-05-31T00:00:00Z""#));
    assert!(eval("active eq true"));
    assert!(!eval("active eq false"));
    assert!(eval("active ne false"));
    assert!(eval("externalId pr and permissions pr and name pr"));
    assert!(!eval("lastSignInAt pr"));
    assert!(eval("lastSignInAt eq null") && eval("externalId ne null"));
    assert!(eval(r#"department eq "engineering""#));
    assert!(eval(r#"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department eq "engineering""#));
    assert!(!eval(r#"department eq "Engineering""#));
}

#[test]
fn logic_grouping_and_precedence() {
    assert!(eval(r#"userName eq "nobody@x.io" or active eq true"#));
    assert!(!eval(r#"userName eq "nobody@x.io" and active eq true"#));
    // `and` binds tighter than `or`: false or (true and true).
    assert!(eval(r#"id eq "no" or active eq true and department eq "engineering""#));
    // Parentheses change it: (false or true) and false.
    assert!(!eval(r#"(id eq "no" or active eq true) and department eq "bi""#));
    assert!(eval(r#"not (department eq "bi")"#));
    assert!(eval(r#"NOT(active eq false) AND (name.givenName sw "A" OR name.givenName sw "G")"#));
}

#[test]
fn multi_valued_lists_and_value_paths() {
    assert!(eval(r#"permissions.companyPermissions eq "admin""#));
    assert!(!eval(r#"permissions.companyPermissions eq "Admin""#));
    assert!(eval(r#"permissions.roles[roleName eq "marketer"]"#));
    assert!(eval(r#"permissions.roles[roleId pr and roleName sw "Mark"]"#));
    assert!(!eval(r#"permissions.roles[roleId pr and roleName eq "Analyst"]"#));
    assert!(eval(r#"permissions.appGroup[appGroupName eq "Shop" and appGroupPermissions eq "edit_campaigns"]"#));
    assert!(!eval(r#"permissions.appGroup[appGroupId eq "ag-2" and appGroupPermissions eq "edit_campaigns"]"#));
    assert!(eval(r#"permissions.appGroup[not (appGroupName pr)] and active eq true"#));
}

#[test]
fn what_is_not_the_grammar_is_refused_with_its_position() {
    assert_eq!(err(""), "invalid filter at character 1: the filter is empty");
    assert!(err("userName").contains("character 9: expected an operator"));
    assert!(err(r#"userName equals "a""#).contains("character 10: 'equals' is not a SCIM operator"));
    assert!(err(r#"userName eq"#).contains("'eq' needs a value"));
    assert!(err(r#"userName eq "a" "b""#).contains("character 17: unexpected \"b\""));
    assert!(err(r#"userName eq ada"#).contains("character 13: 'userName' is compared with a quoted string"));
    assert!(err(r#"userName eq 12"#).contains("quoted string"));
    assert!(err(r#"userName eq "open"#).contains("character 13: this string is not closed"));
    assert!(err(r#"userName eq "bad\q""#).contains("invalid escape"));
    assert!(err(r#"nickName eq "a""#).contains("character 1: 'nickName' is not an attribute"));
    assert!(err(r#"urn:other:userName eq "a""#).contains("not an attribute"));
    assert!(err(r#"emails[type eq "work"]"#).contains("not an attribute"));
    assert!(err(r#"name eq "Ada""#).contains("has sub-attributes"));
    assert!(err(r#"active gt true"#).contains("is a boolean"));
    assert!(err(r#"active eq "true""#).contains("true or false"));
    assert!(err(r#"meta.created eq "yesterday""#).contains("not an RFC 3339 time"));
    assert!(err(r#"meta.created co "2024""#).contains("is a time"));
    assert!(err(r#"userName gt null"#).contains("null is compared only"));
    assert!(err(r#"(userName eq "a""#).contains("expected ')' before the end"));
    assert!(err(r#"not userName eq "a""#).contains("character 5: expected '('"));
    assert!(err(r#"userName eq "a" and"#).contains("expected an attribute before the end"));
    assert!(err(r#"permissions.roles[appGroup[roleId pr]]"#).contains("cannot be nested"));
    assert!(err(r#"userName[value eq "a"]"#).contains("no entries to filter"));
    assert!(err(r#"permissions.roles[teamName eq "a"]"#).contains("'teamName' is not an attribute"));
    // Positions count characters, not bytes.
    assert!(err(r#"userName eq "é" oops"#).contains("character 17"));
}

#[test]
fn hostile_filters_are_bounded() {
    let deep = format!("{}active eq true{}", "(".repeat(5000), ")".repeat(5000));
    assert!(err(&deep).contains("nests deeper than 16"));
    let nots = "not (".repeat(20) + "active eq true" + &")".repeat(20);
    assert!(err(&nots).contains("nests deeper"));
    let ok = format!("{}active eq true{}", "(".repeat(16), ")".repeat(16));
    assert!(eval(&ok));
    let long = vec!["active eq true"; 65].join(" and ");
    assert!(err(&long).contains("more than 64 comparisons"));
    assert!(eval(&vec!["active eq true"; 64].join(" and ")));
}

#[test]
fn arbitrary_text_never_panics() {
    for text in [
        "\"",
        "\\",
        "\"\\",
        "eq eq eq",
        "[[[",
        "]]",
        "userName eq \"\\u12\"",
        "ü eq \"ü\"",
        "\u{0}",
        "not",
        "not (",
        "((((",
    ] {
        let _ = parse(text);
    }
    for text in ["éserName eq \"a\"", "日本語 eq \"x\"", "aaaaaaaaé eq \"x\"", "ééééééééé eq \"x\""] {
        assert!(err(text).contains("not an attribute"), "{text}");
    }
}

proptest::proptest! {
    // No regression files in the source tree: a failure prints its minimal case.
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 512, failure_persistence: None, ..proptest::prelude::ProptestConfig::default()
    })]

    /// Any text at all, multi-byte characters included: an answer, never a panic;
    /// and a filter that parses evaluates without one.
    #[test]
    fn any_text_is_parsed_or_refused(text in ".{0,60}", tail in "(userName|eq|and|not|\\(|\\)|\\[|\\]|\"|\\\\|:| ){0,8}") {
        for t in [format!("{text}{tail}"), format!("{tail}{text}")] {
            if let Ok(f) = parse(&t) {
                let _ = matches(&f, &ada());
            }
        }
    }
}
