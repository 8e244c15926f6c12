//! `registerPurchaseNotificationApple/Google` and `registerSubscriptionNotificationApple/Google`:
//! the stores' server notifications ([`crate::purchases`]) tell the module, after the record
//! changed, with the purchase or subscription in the runtime's shape and the store's payload
//! (JSON text), as Nakama calls them: `fn(ctx, logger, nk, purchase, providerPayload)`.

use std::sync::Arc;

use muster_js::Hook;
use muster_proto::grpc::{StoreProvider, ValidatedPurchase, ValidatedSubscription};
use serde_json::{json, Value};

use super::nk::{purchase_json, subscription_json};
use super::Module;
use crate::purchases::{NotificationKind, NotificationObserver};

/// The module's notification hooks.
pub struct JsPurchaseNotifications(pub Arc<Module>);

/// A hook's id in the registry and Nakama's execution mode for it; `None` for a store that
/// sends no notifications.
fn names(store: StoreProvider, subscription: bool) -> Option<(&'static str, &'static str)> {
    Some(match (store, subscription) {
        (StoreProvider::AppleAppStore, false) => {
            ("purchaseNotificationApple", "purchase_notification_apple")
        }
        (StoreProvider::GooglePlayStore, false) => {
            ("purchaseNotificationGoogle", "purchase_notification_google")
        }
        (StoreProvider::AppleAppStore, true) => (
            "subscriptionNotificationApple",
            "subscription_notification_apple",
        ),
        (StoreProvider::GooglePlayStore, true) => (
            "subscriptionNotificationGoogle",
            "subscription_notification_google",
        ),
        _ => return None,
    })
}

impl JsPurchaseNotifications {
    fn wants(&self, id: &str) -> bool {
        self.0
            .bundle
            .read()
            .registered
            .schedule
            .iter()
            .any(|n| n == id)
    }

    /// Runs the hook on a task of its own: the store's request is answered meanwhile (the
    /// record is already stored), and a failing hook is logged.
    fn tell(&self, store: StoreProvider, subscription: bool, args: Vec<Value>) {
        let Some((id, mode)) = names(store, subscription) else {
            return;
        };
        if !self.wants(id) {
            return;
        }
        let module = self.0.clone();
        tokio::spawn(async move {
            let context = json!({
                "executionMode": mode,
                "env": module.env,
                "node": module.node,
                "queryParams": {},
                "headers": {},
                "vars": {},
            });
            let cost = module.hook_cost(Hook::Schedule, id);
            let answer = module
                .run(&cost, move |vm| {
                    vm.call_hook(Hook::Schedule, id, &context, &args)
                })
                .await;
            if let Err(error) = answer {
                tracing::warn!(hook = id, message = %error.message, "a JavaScript store notification hook failed");
            }
        });
    }
}

impl NotificationObserver for JsPurchaseNotifications {
    fn purchase_notification(
        &self,
        store: StoreProvider,
        _kind: NotificationKind,
        purchase: &ValidatedPurchase,
        provider_payload: &str,
    ) {
        self.tell(
            store,
            false,
            vec![purchase_json(purchase), json!(provider_payload)],
        );
    }

    fn subscription_notification(
        &self,
        store: StoreProvider,
        _kind: NotificationKind,
        subscription: &ValidatedSubscription,
        provider_payload: &str,
    ) {
        self.tell(
            store,
            true,
            vec![subscription_json(subscription), json!(provider_payload)],
        );
    }
}
