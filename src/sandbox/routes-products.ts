import { notFound } from './api-error.js';
import { pageRequest, paginate } from './pagination.js';
import { ok, type RouteDef } from './route-table.js';

export const productRoutes: RouteDef[] = [
  {
    method: 'GET',
    pattern: '/products',
    permission: 'read:products',
    handler: (c) => {
      const page = pageRequest(
        { limit: c.query['limit'], offset: c.query['offset'], cursor: c.query['cursor'] },
        'products',
      );
      const p = paginate(c.state.products, page, (x) => [0, x.id], 'asc', 'products', c.legacy);
      return ok({ data: p.items.map((x) => ({ ...x })), meta: p.meta });
    },
  },
  {
    method: 'GET',
    pattern: '/products/:id',
    permission: 'read:products',
    handler: (c) => {
      const product = c.state.products.find((p) => p.id === c.params['id']);
      if (!product) throw notFound('product.not_found', 'product');
      return ok({ data: { ...product } });
    },
  },
];
