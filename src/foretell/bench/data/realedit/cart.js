var TAX_RATE = 0.2;

function Cart(customer) {
  this.customer = customer;
  this.lines = [];
}

Cart.prototype.add = function (product, quantity) {
  var existing = this.lines.find(function (line) {
    return line.product.id === product.id;
  });
  if (existing) {
    existing.quantity += quantity;
  } else {
    this.lines.push({ product: product, quantity: quantity });
  }
};

Cart.prototype.remove = function (productId) {
  this.lines = this.lines.filter(function (line) {
    return line.product.id !== productId;
  });
};

Cart.prototype.subtotal = function () {
  var total = 0;
  for (var i = 0; i < this.lines.length; i++) {
    total += this.lines[i].product.price * this.lines[i].quantity;
  }
  return total;
};

Cart.prototype.total = function () {
  var subtotal = this.subtotal();
  return subtotal + subtotal * TAX_RATE;
};

function checkout(cart, payment, callback) {
  payment.charge(cart.customer, cart.total(), function (err, receipt) {
    if (err) {
      callback(err);
      return;
    }
    callback(null, { receipt: receipt, items: cart.lines.length });
  });
}

module.exports = { Cart: Cart, checkout: checkout };
