//! The closed lists of strings a dashboard user may carry: its department and the
//! company, workspace and team permission strings, as the platform documents them
//! (its SCIM appendix). A value outside its list is a 400 `invalidValue`.

use serde::{Deserialize, Serialize};

macro_rules! names {
    ($(#[$doc:meta])* $ty:ident { $($variant:ident => $name:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        pub enum $ty {
            $(
                #[doc = $name]
                #[serde(rename = $name)]
                $variant,
            )*
        }

        impl $ty {
            /// Every value, in the documented order.
            // Not every list is published in /Schemas (team permissions nest too deep).
            #[allow(dead_code)]
            pub const ALL: &'static [$ty] = &[$($ty::$variant),*];

            /// The value as the API writes it.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $name),* }
            }

            /// Parses a value (exact, case-sensitive, as the platform's strings are).
            pub fn parse(text: &str) -> Option<$ty> {
                match text { $($name => Some($ty::$variant),)* _ => None }
            }

            /// Every value, comma-separated, for error messages.
            pub fn listing() -> String {
                [$($name),*].join(", ")
            }
        }
    };
}

names! {
    /// A dashboard user's department.
    Department {
        Agency => "agency",
        Bi => "bi",
        CSuite => "c_suite",
        Engineering => "engineering",
        Finance => "finance",
        Marketing => "marketing",
        Pm => "pm",
    }
}

names! {
    /// A company-level permission.
    CompanyPermission {
        Admin => "admin",
        ManageCompanySettings => "manage_company_settings",
        AddRemoveAppGroups => "add_remove_app_groups",
    }
}

names! {
    /// A workspace-level (app group) permission; also what a permission set holds.
    WorkspacePermission {
        Admin => "admin",
        BasicAccess => "basic_access",
        ApproveDenyCampaigns => "approve_deny_campaigns",
        SendCampaignsCanvases => "send_campaigns_canvases",
        PublishCards => "publish_cards",
        EditSegments => "edit_segments",
        ExportUserData => "export_user_data",
        ViewPii => "view_pii",
        ViewUserProfile => "view_user_profile",
        ManageDashboardUsers => "manage_dashboard_users",
        ManageMediaLibrary => "manage_media_library",
        ViewUsageData => "view_usage_data",
        ImportUpdateUserData => "import_update_user_data",
        ViewBillingDetails => "view_billing_details",
        DevConsole => "dev_console",
        LaunchContentBlocks => "launch_content_blocks",
        ManageExternalIntegrations => "manage_external_integrations",
        ManageApps => "manage_apps",
        ManageTeams => "manage_teams",
        ManageEventsAttributesPurchases => "manage_events_attributes_purchases",
        ManageTags => "manage_tags",
        ManageEmailSettings => "manage_email_settings",
        ManageSubscriptionGroups => "manage_subscription_groups",
        ManageApprovalSettings => "manage_approval_settings",
        ManageCatalogsDashboardPermission => "manage_catalogs_dashboard_permission",
    }
}

names! {
    /// A team-level permission.
    TeamPermission {
        Admin => "admin",
        BasicAccess => "basic_access",
        ApproveDenyCampaigns => "approve_deny_campaigns",
        SendCampaignsCanvases => "send_campaigns_canvases",
        PublishCards => "publish_cards",
        EditSegments => "edit_segments",
        ExportUserData => "export_user_data",
        ViewUserProfile => "view_user_profile",
        ManageDashboardUsers => "manage_dashboard_users",
        ManageMediaLibrary => "manage_media_library",
    }
}
