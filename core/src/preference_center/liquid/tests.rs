use proptest::prelude::*;

use super::*;

/// User data for tests: every attribute set to `value`, the global state
/// `opted_in`, group `g1` subscribed, others unsubscribed.
struct Fixed {
    value: String,
}

impl Data for Fixed {
    fn get(&self, var: &Var) -> Value {
        match var {
            Var::EmailGlobal => Value::Text("opted_in".into()),
            Var::GroupState(g) if g == "g1" => Value::Text("subscribed".into()),
            Var::GroupState(_) => Value::Text("unsubscribed".into()),
            Var::SubmitUrl => Value::Text("https://x.test/preferences/t?a=1&b=2".into()),
            Var::Attr(Attr::LastName) | Var::Custom(_) => Value::Nil,
            Var::Attr(_) => Value::Text(self.value.clone()),
            Var::Local(_) => Value::Nil,
        }
    }

    fn now(&self) -> i64 {
        1_780_000_000 // 2026-05-28T20:26:40Z
    }
}

fn render_with(src: &str, value: &str) -> String {
    Template::parse(src).unwrap_or_else(|e| panic!("{src}: {e}")).render(&Fixed { value: value.into() }).html
}

fn render(src: &str) -> String {
    render_with(src, "Ann")
}

fn error(src: &str) -> String {
    Template::parse(src).err().unwrap_or_else(|| panic!("{src} parsed")).to_string()
}

#[test]
fn the_platform_tags_render_the_users_states_and_fields() {
    assert_eq!(render("{{subscribed_state.${email_global}}}"), "opted_in");
    assert_eq!(render("{{ subscribed_state.${g1} }}/{{subscribed_state.${g2}}}"), "subscribed/unsubscribed");
    assert_eq!(
        render("<a href=\"{{preference_center_submit_url}}\">"),
        "<a href=\"https://x.test/preferences/t?a=1&amp;b=2\">"
    );
    assert_eq!(render("{{${email_address}}} {{${first_name}}}"), "Ann Ann");
    let t = Template::parse("<input name=\"{% form_field_name :email_global_state %}\">{% form_field_name :subscription_group g1 %}{% form_field_name :subscription_group ${g2} %}{% form_field_name :subscription_group g1 %}").unwrap();
    let r = t.render(&Fixed { value: String::new() });
    assert_eq!(
        r.html,
        "<input name=\"email_global_state\">subscription_group_g1subscription_group_g2subscription_group_g1"
    );
    assert_eq!(r.fields, vec![FieldRef::EmailGlobal, FieldRef::Group("g1".into()), FieldRef::Group("g2".into())]);
    let refs: Vec<&str> = t.group_refs().iter().map(|(g, _)| g.as_str()).collect();
    assert_eq!(refs, ["g1", "g2", "g1"]);
}

#[test]
fn user_values_cannot_leave_an_unquoted_attribute_value() {
    let evil = "x autofocus onfocus=alert(1) `y`";
    let html = render_with("<input value={{${first_name}}}>", evil);
    assert_eq!(html, "<input value=x&#32;autofocus&#32;onfocus&#61;alert(1)&#32;&#96;y&#96;>");
    // Nor through a capture, whose markup holds the value escaped as text.
    let html = render_with("{% capture n %}{{${first_name}}}{% endcapture %}<input value={{ n }}>", evil);
    assert_eq!(html, "<input value=x&#32;autofocus&#32;onfocus&#61;alert(1)&#32;&#96;y&#96;>");
    // Quoted values and text are escaped as before.
    assert_eq!(render_with("<p title=\"{{${first_name}}}\">{{${first_name}}}</p>", "a b"), "<p title=\"a b\">a b</p>");
}

#[test]
fn user_values_cannot_make_a_url_attribute_run_script() {
    for evil in ["javascript:alert(1)", " JAVASCRIPT:alert(1)", "java\tscript:x", "data:text/html,<script>x</script>"] {
        for src in [
            "<a href=\"{{${first_name}}}\">go</a>",
            "<a href='{{${first_name}}}'>go</a>",
            "<a href={{${first_name}}}>go</a>",
            "<form action=\"{{${first_name}}}\"></form>",
            "<a class=\"c\" href=\"{{ ${first_name} | strip }}\">go</a>",
        ] {
            let html = render_with(src, evil);
            assert!(!html.to_ascii_lowercase().contains("script:") && !html.contains("data:"), "{src} {evil}: {html}");
            assert!(html.contains("=\"#\"") || html.contains("='#'") || html.contains("=#"), "{src}: {html}");
        }
    }
    // The URL is checked whole: a scheme the author's text completes is caught too.
    assert_eq!(render_with("<a href=\"{{${first_name}}}:x\">go</a>", "javascript"), "<a href=\"#\">go</a>");
    // Safe URLs and relative ones stay.
    assert_eq!(
        render_with("<a href=\"{{${first_name}}}\">go</a>", "https://x.test/a"),
        "<a href=\"https://x.test/a\">go</a>"
    );
    assert_eq!(
        render_with("<a href=\"/u/{{${first_name}}}\">go</a>", "javascript:x"),
        "<a href=\"/u/javascript:x\">go</a>"
    );
    // What the author wrote alone is the author's.
    assert_eq!(render("<a href=\"https://x.test/{{${first_name}}}\">"), "<a href=\"https://x.test/Ann\">");
}

#[test]
fn user_values_are_escaped_and_captured_markup_is_not_escaped_twice() {
    assert_eq!(render_with("<p>{{${first_name}}}</p>", "<b>&'\""), "<p>&lt;b&gt;&amp;&#39;&quot;</p>");
    assert_eq!(
        render_with("{% capture n %}<i>{{${first_name}}}</i>{% endcapture %}{{ n }}|{{ n | escape }}", "<b>"),
        "<i>&lt;b&gt;</i>|&lt;i&gt;&amp;lt;b&amp;gt;&lt;/i&gt;"
    );
    assert_eq!(
        render_with("{% capture n %}<i>x</i>{% endcapture %}{{ n | append: ${first_name} }}", "<b>"),
        "<i>x</i>&lt;b&gt;"
    );
}

#[test]
fn conditions_compare_join_and_branch() {
    let page = "{% if subscribed_state.${email_global} == 'unsubscribed' %}off{% elsif subscribed_state.${email_global} == \"opted_in\" %}in{% else %}on{% endif %}";
    assert_eq!(render(page), "in");
    assert_eq!(render("{% if subscribed_state.${g1} != 'subscribed' or 1 < 2 and 3 >= 3 %}y{% endif %}"), "y");
    assert_eq!(render("{% if ${last_name} %}has{% else %}none{% endif %}"), "none");
    assert_eq!(render("{% unless ${last_name} %}none{% endunless %}"), "none");
    assert_eq!(render("{% if ${first_name} contains 'nn' %}c{% endif %}"), "c");
    assert_eq!(render("{% if ${last_name} == blank %}b{% endif %}{% if '' == empty %}e{% endif %}"), "be");
    assert_eq!(render("{% if 2 > 10 %}x{% endif %}{% if 'b' > 'a' %}s{% endif %}"), "s");
    assert_eq!(render("{% if true and false %}x{% else %}f{% endif %}"), "f");
}

#[test]
fn filters_captures_comments_and_whitespace_control() {
    assert_eq!(render("Hi {{ ${last_name} | default: 'there' }}!"), "Hi there!");
    // What the page's author wrote is output as written; user data is escaped.
    assert_eq!(render("{{ ${last_name} | default: '<b>friend</b>' }}"), "<b>friend</b>");
    assert_eq!(render_with("{{ ${first_name} | append: '<br>' }}", "<i>"), "&lt;i&gt;<br>");
    assert_eq!(render("{{ ${first_name} | default: 'x' | upcase | append: '!' | prepend: '¡' }}"), "¡ANN!");
    assert_eq!(render("{{ '  MiXed ' | strip | downcase | capitalize }} {{ 'abc' | size }}"), "Mixed 3");
    assert_eq!(render("{% capture g %}Hello {{${first_name}}}{% endcapture %}[{{g}}]"), "[Hello Ann]");
    assert_eq!(render("{% assign n = 4 %}{% if n >= 4 %}{{ n }}{% endif %}"), "4");
    assert_eq!(render("a{% comment %} {% if %} {{ nope }} {% endcomment %}b{% # note %}c"), "abc");
    assert_eq!(render("{% raw %}{{ kept }}{% endraw %}"), "{{ kept }}");
    assert_eq!(render("a  {{- 'b' -}}  c {%- if true -%} d {%- endif %}"), "abcd");
    assert_eq!(render("{{ custom_attribute.${plan} | default: 'free' }}"), "free");
    // Shopify's truncate, replace and remove.
    assert_eq!(render("{{ 'Ground control to Major Tom.' | truncate: 20 }}"), "Ground control to...");
    assert_eq!(
        render("{{ 'Ground control' | truncate: 11, ', etc.' }}|{{ 'short' | truncate: 5 }}"),
        "Groun, etc.|short"
    );
    assert_eq!(render("{{ 'abc' | truncate: 2, '...' }}"), "...");
    assert_eq!(render("{{ 'a-b-c' | replace: '-', '+' }} {{ 'a-b-c' | replace_first: '-', '' }}"), "a+b+c ab-c");
    assert_eq!(render("{{ 'a-b-c' | remove: '-' }} {{ 'a-b-c' | remove_first: '-' }}"), "abc ab-c");
    assert_eq!(render_with("{{ ${first_name} | replace: 'x', '<b>' }}", "<x>"), "&lt;&lt;b&gt;&gt;");
}

#[test]
fn bad_templates_are_errors_with_line_and_column() {
    assert_eq!(error("ok\n  {% frobnicate %}"), "line 2, column 3: unknown tag 'frobnicate'");
    // A filter's error points at the filter.
    assert_eq!(error("{{ ${first_name} | shout }}"), "line 1, column 20: unknown filter 'shout'");
    assert_eq!(
        error("é\n  {{- ${first_name} |\n  upcase: 1 }}"),
        "line 3, column 3: the filter 'upcase' takes 0 argument(s)"
    );
    assert_eq!(error("{{ ${first_name} | }}"), "line 1, column 1: a filter name must follow '|'");
    assert_eq!(error("{{ 'a' | truncate }}"), "line 1, column 10: the filter 'truncate' takes 1 or 2 arguments");
    assert_eq!(error("{{ 'a' | replace: 'a' }}"), "line 1, column 10: the filter 'replace' takes 2 argument(s)");
    assert_eq!(error("x {{ nobody }}"), "line 1, column 3: unknown variable 'nobody'");
    assert_eq!(error("{{${shoe_size}}}"), "line 1, column 1: unknown attribute '${shoe_size}'");
    assert_eq!(error("\n\n {% if true %}x"), "line 3, column 2: '{% if %}' is not closed");
    assert_eq!(error("{% if true %}{% capture a %}{% endif %}"), "line 1, column 14: '{% capture %}' is not closed");
    assert_eq!(error("a {% endif %}"), "line 1, column 3: '{% endif %}' without its opening tag");
    assert_eq!(error("é {{ x"), "line 1, column 3: an output '{{' is not closed with '}}'");
    assert!(error("{% form_field_name :everything %}").contains("form_field_name takes"));
    assert_eq!(error("{% if a %}{% else %}{% else %}{% endif %}"), "line 1, column 1: unknown variable 'a'");
    assert_eq!(
        error("{% if 1 %}{% else %}{% else %}{% endif %}"),
        "line 1, column 21: '{% else %}' after '{% else %}'"
    );
    assert_eq!(error("{% comment %} x"), "line 1, column 1: '{% comment %}' is not closed with '{% endcomment %}'");
    assert_eq!(error("{{ 'a' 'b' }}"), "line 1, column 1: unexpected string 'b' in the output");
    assert_eq!(error("{{ subscribed_state.email_global }}"), "line 1, column 1: write 'subscribed_state.${name}'");
    assert!(error("{% assign preference_center_submit_url = 1 %}").contains("cannot be a variable name"));
}

#[test]
fn nesting_and_output_size_are_bounded() {
    let deep = "{% if true %}".repeat(MAX_DEPTH + 1) + &"{% endif %}".repeat(MAX_DEPTH + 1);
    assert!(error(&deep).contains("nested more than"));
    let ok = "{% if true %}".repeat(MAX_DEPTH) + "x" + &"{% endif %}".repeat(MAX_DEPTH);
    assert_eq!(render(&ok), "x");
    // Each capture doubles the last: 2^30 copies of a user value would be gigabytes.
    let mut doubling = String::from("{% capture v0 %}{{${first_name}}}{% endcapture %}");
    for i in 1..30 {
        doubling.push_str(&format!("{{% capture v{i} %}}{{{{v{p}}}}}{{{{v{p}}}}}{{% endcapture %}}", p = i - 1));
    }
    doubling.push_str("{{v29}}");
    assert!(error(&doubling).contains("could render more than"));
    assert!(error(&doubling).contains("captures and assigns"), "{}", error(&doubling));
    // Without captures, the message says what is counted, not captures.
    let wide = "{{ ${first_name} | upcase | escape }}".repeat(600);
    let message = error(&wide);
    assert!(message.contains("its text with every output at its longest"), "{message}");
}

#[test]
fn case_renders_every_matching_when_or_else() {
    let t = "{% case ${first_name} %}ignored{% when 'Bob' %}bob{% when 'Ann', 'Eve' %}ann-or-eve\
             {% when 'Zed' or 'Ann' %}+zed-or-ann{% else %}nobody{% endcase %}";
    assert_eq!(render(t), "ann-or-eve+zed-or-ann");
    assert_eq!(render_with(t, "Bob"), "bob");
    assert_eq!(render_with(t, "Kim"), "nobody");
    assert_eq!(render("{% case 2 %}{% when 1 %}one{% when 2 %}two{% endcase %}"), "two");
    assert_eq!(render("{% case 3 %}{% when 1 %}one{% endcase %}"), "");
    assert_eq!(
        error("{% case 1 %}{% when 1 %}{% else %}{% when 2 %}{% endcase %}"),
        "line 1, column 35: '{% when %}' after '{% else %}'"
    );
    assert_eq!(error("{% case 1 %}{% when 1 %}x"), "line 1, column 1: '{% case %}' is not closed");
    assert_eq!(error("{% when 1 %}"), "line 1, column 1: '{% when %}' without its opening tag");
}

#[test]
fn for_loops_over_ranges_and_split_lists_as_liquid_does() {
    assert_eq!(render("{% for i in (1..3) %}{{ i }}{% unless forloop.last %},{% endunless %}{% endfor %}"), "1,2,3");
    let list = "{% assign fruits = 'apple, pear ,plum' | split: ',' %}";
    assert_eq!(
        render(&(list.to_string() + "{% for f in fruits %}[{{ f | strip }}]{% endfor %}")),
        "[apple][pear][plum]"
    );
    assert_eq!(
        render(&(list.to_string() + "{% for f in fruits reversed limit: 2 offset: 1 %}{{ forloop.index }}/{{ forloop.length }}:{{ f | strip }} {% endfor %}")),
        "1/2:plum 2/2:pear "
    );
    assert_eq!(render("{% for i in (1..0) %}x{% else %}none{% endfor %}"), "none");
    assert_eq!(render("{% for i in (1..6) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}"), "13");
    assert_eq!(
        render("{% for i in (1..2) %}{% for j in (1..2) %}{{ i }}{{ j }}{{ forloop.first }} {% endfor %}{% endfor %}"),
        "11true 12false 21true 22false "
    );
    // The loop's variable exists inside it only; a name set before comes back.
    assert_eq!(render("{% assign i = 'x' %}{% for i in (1..2) %}{{ i }}{% endfor %}{{ i }}"), "12x");
    // A user value split into words, escaped as it goes out.
    assert_eq!(
        render_with(
            "{% assign words = ${first_name} | split: ' ' %}{% for w in words %}({{ w }}){% endfor %}",
            "<a>  b"
        ),
        "(&lt;a&gt;)(b)"
    );
    assert_eq!(render("{{ 'a-b-c' | split: '-' | join: ' + ' }}|{{ 'a-b' | split: '-' | size }}|{{ 'a-b' | split: '-' | first }}{{ 'a-b' | split: '-' | last }}"), "a + b + c|2|ab");
    assert_eq!(
        render("{{ 'a,b,,' | split: ',' | size }} {{ 'abc' | split: '' | join }} {{ '' | split: ',' | size }}"),
        "2 a b c 0"
    );
    assert_eq!(render("{% assign l = 'x,y' | split: ',' %}{% if l contains 'y' %}yes{% endif %}{{ l }}"), "yesxy");
    assert_eq!(error("{% break %}"), "line 1, column 1: '{% break %}' outside a for loop");
    assert_eq!(error("{{ forloop.index }}"), "line 1, column 1: 'forloop' outside a for loop");
    assert_eq!(
        error("{% for i in (1..3) %}{{ forloop.nope }}{% endfor %}"),
        "line 1, column 22: unknown 'forloop.nope'"
    );
    assert_eq!(
        error("{% for i (1..3) %}{% endfor %}"),
        "line 1, column 1: write '{% for item in list %}' or '{% for i in (1..n) %}'"
    );
    assert_eq!(
        error("{% for i in (1..3) sorted %}{% endfor %}"),
        "line 1, column 1: unknown loop option 'sorted' (limit, offset, reversed)"
    );
    assert_eq!(error("{% for i in (1..3) %}"), "line 1, column 1: '{% for %}' is not closed");
    assert!(error("{% for i in (1..5000) %}{% endfor %}").contains("at most 2000 passes"));
}

#[test]
fn date_formats_now_user_dates_and_leaves_other_text() {
    assert_eq!(render("&copy; {{ 'now' | date: '%Y' }}"), "&copy; 2026");
    assert_eq!(render("{{ 'today' | date: '%-d %B %Y, %H:%M' }}"), "28 May 2026, 20:26");
    assert_eq!(render_with("{{ ${first_name} | date: '%d/%m/%Y' }}", "1990-02-03"), "03/02/1990");
    assert_eq!(render_with("{{ ${first_name} | date: '%Y' }}", "2020-01-02T03:04:05+02:00"), "2020");
    assert_eq!(render("{{ 0 | date: '%Y-%m-%d' }}"), "1970-01-01");
    assert_eq!(render_with("{{ ${first_name} | date: '%Y' }}", "<not a date>"), "&lt;not a date&gt;");
    assert_eq!(render("{{ ${last_name} | date: '%Y' }}"), "");
    assert_eq!(error("{{ 'now' | date: '%Q' }}"), "line 1, column 12: '%Q' is not a date format this engine knows");
    assert_eq!(
        error("{{ 'now' | date: ${first_name} }}"),
        "line 1, column 12: the filter 'date' takes a quoted format, such as '%Y-%m-%d'"
    );
}

#[test]
fn loops_are_bounded_by_what_they_can_render_and_the_steps_they_take() {
    // Each pass can write a user value: 2,000 passes of 6 KiB is over 8 MiB.
    let wide = "{% for i in (1..2000) %}{{ ${first_name} }}{% endfor %}";
    assert!(error(wide).contains("could render more than"), "{}", error(wide));
    assert_eq!(render("{% for i in (1..1000) %}{{ ${first_name} }}{% endfor %}").len(), 3000);
    // Nested loops that write nothing still take steps.
    let busy = "{% for a in (1..1000) %}{% for b in (1..1000) %}{% endfor %}{% endfor %}";
    assert!(error(busy).contains("steps to render"), "{}", error(busy));
    // A variable that grows in a loop: followed pass by pass up to 64 passes...
    let grows = |n: u32| {
        format!("{{% assign s = '' %}}{{% for i in (1..{n}) %}}{{% assign s = s | append: 'ab' %}}{{% endfor %}}{{{{ s }}}}")
    };
    assert_eq!(render(&grows(64)).len(), 128);
    // ...beyond, it cannot be bounded.
    assert!(error(&grows(65)).contains("steps to render"), "{}", error(&grows(65)));
    // A split user value has at most 1,025 items: a loop over it is bounded by that.
    let per_word = "{% assign ws = ${first_name} | split: ',' %}{% for w in ws %}{{ w }}{% endfor %}";
    assert!(error("{% for w in ${first_name} | split: ',' %}{% endfor %}").contains("unexpected '|' in the for"));
    assert_eq!(render_with(per_word, "a,b"), "ab");
}

/// Pieces of well-formed templates that use user values every way the engine allows.
fn piece() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "<p>",
        "</p>",
        "{{${first_name}}}",
        "{{ ${email_address} | upcase }}",
        "{{ ${city} | default: ${first_name} }}",
        "{{ ${first_name} | append: ${user_id} | capitalize }}",
        "{% capture c %}<b>{{${first_name}}}</b>{% endcapture %}",
        "{{ c }}",
        "{{ c | append: ${first_name} }}",
        "{{ ${first_name} | prepend: c }}",
        "{{ c | escape }}",
        "{% assign a = ${first_name} | strip %}{{ a }}",
        "{% if ${first_name} contains '<' %}lt{% else %}{{${first_name}}}{% endif %}",
        "<a href=\"{{preference_center_submit_url}}\">",
        "{{subscribed_state.${g1}}}",
        "{% form_field_name :subscription_group g1 %}",
    ])
    .prop_map(str::to_string)
}

proptest! {
    // No regression files in the source tree: a failure prints its minimal case.
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any text at all: parsing answers (a template or an error), never panics.
    #[test]
    fn parsing_never_panics(src in ".{0,200}") {
        let _ = Template::parse(&src);
    }

    /// Text made of the syntax's own pieces, which reaches far deeper than random text.
    #[test]
    fn parsing_syntax_soup_never_panics(parts in prop::collection::vec(prop::sample::select(vec![
        "{{", "}}", "{%", "%}", "-", "${", "}", "'", "\"", "if", "elsif", "else", "endif", "capture",
        "endcapture", "comment", "endcomment", "raw", "endraw", "x", " ", "\n", "|", ":", "default", "==",
        "and", "or", "1", "é", "subscribed_state", ".", "form_field_name", ":email_global_state", "#",
    ]), 0..60)) {
        let src: String = parts.concat();
        if let Ok(t) = Template::parse(&src) {
            let _ = t.render(&Fixed { value: "v".into() });
        }
    }

    /// Whatever a valid page does with user values, none reaches the page unescaped.
    #[test]
    fn no_user_value_is_output_unescaped(parts in prop::collection::vec(piece(), 1..12), evil in "[a-z]{0,3}") {
        let src = format!("{{% capture c %}}<i>{{{{${{first_name}}}}}}</i>{{% endcapture %}}{}", parts.concat());
        let t = Template::parse(&src).unwrap_or_else(|e| panic!("{src}: {e}"));
        let value = format!("<x-evil {evil}'\"&>");
        let html = t.render(&Fixed { value }).html;
        prop_assert!(!html.contains("<x-evil"), "{}", html);
        prop_assert!(!html.contains("'\"&>"), "{}", html);
    }
}
